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
import sys
from pathlib import Path

import openai

from tests.integration.gateway_access_env import Stream, chat

THREADS = 4


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
