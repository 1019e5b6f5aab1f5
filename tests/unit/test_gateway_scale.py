"""The gateway's controller-side work is linear in the fleet (benchmarks/render_scale.py measures it
at 1k/10k/100k hosts): rendering (a per-name count made 100,000 hosts take 399 s), the changes of
a drain or an undrain (vfleet.roles.gateway._nginx.plan_config, pure), and the rollout's batches.
Bounds here are generous: they catch a quadratic step, not a slow machine."""

import hashlib
import json
import time

import pytest

from tests.unit.gateway_cases import GW
from vfleet.engine.facts import FileState, UnitState
from vfleet.roles.gateway import _nginx as nginx, _render as gr
from vfleet.roles.gateway._files import GatewayFile, GatewayFiles, render_files
from vfleet.roles.gateway._render import Backend
from vfleet.roles.rollout._batches import batch_sizes, plan_batches
from vfleet.roles.rollout._rolling import Rollout

N = 20_000


def _fleet(n: int, models: int = 1) -> list[Backend]:
    return [
        Backend(f"gpu{i:06d}", f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", 8000, f"m{i % models}") for i in range(n)
    ]


def _on_host(f: GatewayFile) -> FileState:
    return FileState("file", hashlib.sha256(f.content.encode()).hexdigest(), f.mode.lstrip("0"), "root", "root")


def _facts(files: GatewayFiles, drained: str | None = None) -> dict:
    """A running gateway (nginx and njs installed, no TLS) that serves `files`."""
    return {
        "nginx": True,
        "njs": True,
        "unit": UnitState("enabled", "active"),
        "default_site": FileState("missing"),
        "conf": _on_host(files.conf),
        "js": _on_host(files.supporting[0]),
        "tls_cert": FileState("missing"),
        "tls_key": FileState("missing"),
        "drained": FileState("file", "x", "644", content=drained) if drained else FileState("missing"),
        "caps": FileState("missing"),
    }


def test_render_of_many_hosts_and_many_models_is_fast():
    for models in (1, N // 2):  # one model of N hosts; a model per two hosts (one scan per model was quadratic)
        t0 = time.perf_counter()
        files = render_files(_fleet(N, models), GW, drained=[f"gpu{i:06d}" for i in range(0, N, 3)])
        assert time.perf_counter() - t0 < 20, models
        assert files.conf.content.count(" down;  # gpu") == len(range(0, N, 3))
        settings = next(ln for ln in files.supporting[0].content.splitlines() if ln.startswith("var S = "))
        assert len(json.loads(settings.removeprefix("var S = ").removesuffix(";"))["models"]) == models  # njs: all


def test_duplicate_names_are_found_in_one_pass_and_named_once():
    bs = _fleet(N)
    bs += [bs[5], bs[7], bs[5]]
    t0 = time.perf_counter()
    with pytest.raises(gr.GatewayRenderError, match=r"^duplicate backend names: gpu000005, gpu000007$"):
        gr.render_gateway(bs, GW)
    assert time.perf_counter() - t0 < 5


def test_drain_and_undrain_plans_are_pure_and_fast():
    bs = _fleet(N)
    files = render_files(bs, GW)
    drained_files = render_files(bs, GW, drained={"gpu000042"})
    t0 = time.perf_counter()
    drain = nginx.plan_config(GW, bs, _facts(files), drained={"gpu000042"})
    undrain = nginx.plan_config(GW, bs, _facts(drained_files, "gpu000042\n"), drained=set())
    assert time.perf_counter() - t0 < 20
    # a drain changes the conf only: the njs module (models, not hosts) stays as it is
    assert [c.action for c in drain] == [c.action for c in undrain] == ["drained state", "nginx config", "service"]
    assert drain[1].target == undrain[1].target == gr.GATEWAY_CONF_PATH
    assert drain[1].reason == undrain[1].reason == "content" and "systemctl reload nginx && " in drain[2].command
    assert nginx.plan_config(GW, bs, _facts(files), drained=None) == []  # converged: nothing to do


def test_batches_of_one_over_100k_hosts_are_fast():
    hosts = [f"h{i}" for i in range(100_000)]
    t0 = time.perf_counter()
    assert batch_sizes("1", len(hosts)) == [1] * len(hosts)
    batches = plan_batches("1", hosts, {h: "m" for h in hosts}, {"m": len(hosts)})
    assert time.perf_counter() - t0 < 10 and len(batches) == len(hosts)
    # many models side by side: batch n holds every model's n-th host, one pass over the hosts
    models = {h: ("big" if i % 2 else f"solo{i}") for i, h in enumerate(hosts)}
    t0 = time.perf_counter()
    batches = plan_batches("1", hosts, models)
    assert time.perf_counter() - t0 < 10
    assert len(batches) == 50_000 and len(batches[0]) == 50_001 and sum(map(len, batches)) == len(hosts)


def test_a_drain_looks_up_its_models_hosts():
    bs = _fleet(6, models=2)
    r = Rollout.__new__(Rollout)
    r.backends = bs
    r.__post_init__()
    assert r.peers("gpu000000") == {"gpu000000", "gpu000002", "gpu000004"}
    assert r.peers("unknown") == set()
