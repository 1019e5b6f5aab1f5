"""The noisy tenant's flood, in a process of its own:

    python -m tests.integration.noisy_flood URL KEY_FILE MODEL PER_SECOND

Why a process: the quiet tenant's latencies are measured in the test's process, and the
flood's client work (the SDK and its threads, ~15 requests a second) would take the same
interpreter lock there and show up as gateway latency. It floods until its stdin closes, then
prints one JSON object per request (the Outcome fields, times on the machine's monotonic
clock, which both processes share) and a last one with the flood's start and end."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, TypeVar

import openai

from tests.integration.gateway_access_env import Outcome, Stream, chat

THREADS = 4
REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def beside_flood(url: str, key_file: Path, model: str, per_second: float, run: Callable[[], T]
                 ) -> tuple[T, list[Outcome], float]:
    """`run()` while this module floods `model` from a process of its own (on 1.5 s before
    `run` starts): what run returned, the flood's outcomes, and how long it flooded."""
    flood = subprocess.Popen([sys.executable, "-m", "tests.integration.noisy_flood", url, str(key_file), model,
                              str(per_second)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    time.sleep(1.5)
    result = run()
    out, _ = flood.communicate("", timeout=120)
    *lines, span = [json.loads(line) for line in out.splitlines()]
    return result, [Outcome(**o) for o in lines], span["ended"] - span["began"]


def main(url: str, key_file: str, model: str, per_second: float) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key=Path(key_file).read_text().strip(), max_retries=0,
                           timeout=30)
    with Stream(lambda: chat(client, model), THREADS, THREADS / per_second) as flood:
        sys.stdin.read()
    for o in flood.outcomes:
        print(json.dumps({k: v for k, v in dataclasses.asdict(o).items() if k != "body"}))
    print(json.dumps({"began": flood.began, "ended": flood.ended}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
