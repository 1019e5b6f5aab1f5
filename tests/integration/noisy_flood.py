"""The noisy tenant's flood, in a process of its own, switched on and off by the test:

    python -m tests.integration.noisy_flood URL KEY_FILE MODEL PER_SECOND

Why a process: the quiet tenant's latencies are measured in the test's process, and the
flood's client work (the SDK and its threads, ~20 requests a second) would take the same
interpreter lock there and show up as gateway latency. It runs at nice 19: the noisy tenant's
client is on a machine of its own, not on the lab's two cores (it used ~0.8 CPU-s a run).

Why one process switched on and off, not one per turn: starting it (the interpreter, the SDK's
imports, its TLS context: 0.5 to 0.8 s of CPU here, more on a busy 2-core machine) is not the noisy tenant's
traffic, and turns short enough to be many put the machine's own hiccups (a Prometheus scrape,
a timer) on both sides alike. With one flood process per turn and three turns a side, the p95
of 72 requests was decided by four of them, and CI saw 0.28 s beside the flood against 0.175 s
alone where the same code here gave ratios from 0.74 to 1.21.

Protocol: it floods until each thread has had an answer (connections up), pauses, prints
"ready"; then "on"/"off" lines on stdin switch the flood; at the end of stdin it prints one JSON
object per request sent while on (the Outcome fields, times on the machine's monotonic clock,
which both processes share) and a last one with the seconds it was on."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import openai

from tests.integration.gateway_clients import Outcome, Stream, chat

THREADS = 4
REPO = Path(__file__).resolve().parents[2]
NICE = 19  # the noisy tenant's client runs on its own machine, not on the lab's two cores


class NoisyFlood:
    """The flood's process seen from the test: `on()`, `off()`, then `close()` for the outcomes
    of the requests sent while on and the seconds it was on."""

    def __init__(self, url: str, key_file: Path, model: str, per_second: float) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.noisy_flood", url, str(key_file), model, str(per_second)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        ready = self._proc.stdout.readline()
        if ready.strip() != "ready":
            self._proc.kill()
            raise RuntimeError(f"the noisy flood did not start (exit {self._proc.wait()}): {ready!r}")

    def _say(self, word: str) -> None:
        self._proc.stdin.write(word + "\n")
        self._proc.stdin.flush()

    def on(self) -> None:
        self._say("on")

    def off(self) -> None:
        self._say("off")

    def close(self) -> tuple[list[Outcome], float, float]:
        """The requests sent while on, the seconds it was on, the CPU seconds its process used."""
        out, _ = self._proc.communicate("", timeout=120)
        *lines, span = [json.loads(line) for line in out.splitlines()]
        return [Outcome(**o) for o in lines], span["on_s"], span["cpu_s"]


def main(url: str, key_file: str, model: str, per_second: float) -> None:
    os.nice(NICE)
    client = openai.OpenAI(base_url=url + "/v1", api_key=Path(key_file).read_text().strip(), max_retries=0, timeout=30)
    switch = threading.Event()
    switch.set()

    def send() -> Outcome:
        switch.wait()
        return chat(client, model)

    spans: list[tuple[float, float]] = []
    with Stream(send, THREADS, THREADS / per_second) as flood:
        while len(flood.outcomes) < THREADS:
            time.sleep(0.05)
        switch.clear()
        time.sleep(1.0)  # the warm-up's last requests come back
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "on":
                spans.append((time.monotonic(), 0.0))
                switch.set()
            else:
                switch.clear()
                spans[-1] = (spans[-1][0], time.monotonic())
        switch.set()  # the threads waiting to send see the stop and end
    if spans and not spans[-1][1]:
        spans[-1] = (spans[-1][0], flood.ended)
    for o in flood.outcomes:
        if any(start <= o.sent <= end for start, end in spans):
            print(json.dumps({k: v for k, v in dataclasses.asdict(o).items() if k != "body"}))
    used = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"on_s": sum(end - start for start, end in spans), "cpu_s": used.ru_utime + used.ru_stime}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
