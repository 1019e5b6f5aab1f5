"""Helpers of tests/integration/test_models.py: the two-model inventory (one child group of
`vllm` per model) deployed for the module, a host's vLLM main PID, and the measurement of
issue 24's noisy-neighbour test: the quiet tenant's turns alone and beside the noisy tenant's
flood, and the figures printed from them."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import yaml

from tests.integration.deploy_env import run_report, vfleet, write_deploy_inventory
from tests.integration.fourth_host import lab_inventory_with_lab4, retire
from tests.integration.gateway_access_env import NOISY_RATE, Access, key_path
from tests.integration.gateway_clients import Outcome, chat, fixed, p95
from tests.integration.noisy_flood import NoisyFlood
from tests.integration.test_rollout import gateway_url

MODELS = {
    "tiny_a": (("lab1", "lab4"), {"served_model_name": "tiny-a", "gateway_max_tokens": 8, "gateway_route_prefix": "a"}),
    "tiny_b": (("lab2",), {"served_model_name": "tiny-b"}),
}


def two_models_inventory(lab_inv, dest):
    """The deploy inventory with `vllm` split into one child group per model."""
    path = write_deploy_inventory(lab_inv, dest)
    data = yaml.safe_load(path.read_text())
    hosts = data["all"]["children"]["vllm"].pop("hosts")
    data["all"]["children"]["vllm"]["children"] = {
        group: {"hosts": {h: hosts[h] for h in members}, "vars": vars} for group, (members, vars) in MODELS.items()
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@contextlib.contextmanager
def two_models_deployed(lab, work: Path):
    """The two models deployed on lab1, lab2, lab4 (lab3 the gateway): the module's fleet, as
    {"inv", "work", "report", "url"}; lab4's vLLM retired at the end."""
    inv = two_models_inventory(lab_inventory_with_lab4(lab, work), work)
    code, report, out = run_report("deploy", inv, work / "deploy.json", timeout=2400)
    try:
        assert code == 0, out[-4000:]
        yield {"inv": inv, "work": work, "report": report, "url": gateway_url(inv)}
    finally:
        retire(inv)


def main_pid(inv, host: str) -> str:
    out = vfleet(
        "run", "--inventory", str(inv), "--limit", host, "--command", "systemctl show -p MainPID --value vllm.service"
    ).stdout
    return next(ln.split()[1] for ln in out.splitlines() if ln.startswith(f"[{host}] "))


QUIET_THREADS, QUIET_EACH = 3, 8  # one quiet turn: 24 chats of 32 tokens each, under a second on the lab
# Turns alone and beside the flood, ABBA: 1152 requests a side. The p95 of 384 was decided by the
# ~12 hiccups of the lab's 2 cores that landed in each side's tail: with no flood at all, ratios
# of 0.89-1.06 (client) and 0.97-1.33 (the gateway's own request times) in three runs.
ROUNDS = 48
QUIET_TOKENS = 32
FLOOD_PER_S = 20 * NOISY_RATE  # the noisy tenant's flood: 20x its rate, from a process of its own


def alone_and_beside_flood(access: Access) -> tuple[list[Outcome], list[Outcome], list[Outcome], float, float, float]:
    """The quiet tenant's chats to tiny-b alone and beside the noisy tenant's flood (NoisyFlood,
    another process) in ROUNDS turns of each, alone-beside then beside-alone: (alone, beside,
    the flood's requests, the seconds it was on, its client's CPU seconds, the wall time from
    before the flood's warm-up to its end)."""
    quiet = access.sdk("quiet")

    def quiet_turn(flooded: bool) -> list[Outcome]:
        if flooded:
            flood.on()
        time.sleep(0.3)  # the flood's threads are under way (or would be)
        try:
            # 32 tokens each (ignore_eos): a reply of a few tokens is over in a few ms, and its p95
            # measures the machine's scheduling more than the gateway
            return fixed(
                lambda: chat(quiet, "tiny-b", QUIET_TOKENS, extra_body={"ignore_eos": True}), QUIET_THREADS, QUIET_EACH
            )
        finally:
            if flooded:
                flood.off()

    alone, beside = [], []
    started = time.monotonic()
    flood = NoisyFlood(access.url, key_path(access.key_dir, "noisy"), "tiny-b", FLOOD_PER_S)
    try:
        for turn in range(ROUNDS):
            first_alone = turn % 2 == 0
            alone += quiet_turn(False) if first_alone else []
            beside += quiet_turn(True)
            alone += [] if first_alone else quiet_turn(False)
    finally:
        noise, secs, flood_cpu = flood.close()
        wall = time.monotonic() - started
    return alone, beside, noise, secs, flood_cpu, wall


def side_by_side_figures(
    alone: list[Outcome], beside: list[Outcome], noise: list[Outcome], secs: float, flood_cpu: float
) -> dict:
    """What the noisy-neighbour test prints: both p95s, the flood's rate and answers, and how many
    quiet requests ran beside one of the noisy tenant's admitted requests."""
    refused, admitted = [o for o in noise if o.status == 429], [o for o in noise if o.status == 200]
    base, flooded = p95(alone), p95(beside)
    overlapped = [q for q in beside if any(a.sent < q.sent + q.took and q.sent < a.sent + a.took for a in admitted)]
    return {
        "quiet_p95_alone_s": round(base, 3),
        "quiet_requests_alone": len(alone),
        "quiet_p95_beside_noise_s": round(flooded, 3),
        "quiet_requests_beside": len(beside),
        "ratio": round(flooded / base, 3),
        "noisy_sent_per_s": round(len(noise) / secs, 1),
        "noisy_429": len(refused),
        "noisy_200": len(admitted),
        "noisy_client_cpu_s": round(flood_cpu, 1),
        "quiet_beside_an_admitted_noisy_request": len(overlapped),
    }
