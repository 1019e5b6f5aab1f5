"""Is a vLLM host ready? Probed ON the host (the controller may not reach port 8000 through
a firewall), one SSH round trip per probe, the API key sent on stdin, never in argv.

States: 'loading' (port closed: connection refused, the model is still loading), 'unhealthy'
(/health not 200), 'no-model' (the served name not listed), 'ready'; 'dead' when systemd says
the unit failed, so a crash fails fast instead of waiting out the timeout."""

from __future__ import annotations

import json
import shlex
import time

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.runner import HostContext, HostFailed
from vfleet.roles.triage import failure_journal

q = shlex.quote

PROBE = r"""
import json, sys, urllib.request, urllib.error
p = json.loads(sys.stdin.read())
base = "http://127.0.0.1:%d" % p["port"]
def get(path, key=None, timeout=5):
    req = urllib.request.Request(base + path)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()
try:
    status, _ = get("/health")
except urllib.error.HTTPError as e:
    print("unhealthy %d" % e.code); sys.exit(0)
except (ConnectionRefusedError, ConnectionResetError):
    print("loading"); sys.exit(0)
except urllib.error.URLError as e:
    r = e.reason
    print("loading" if isinstance(r, (ConnectionRefusedError, ConnectionResetError)) else "unhealthy %s" % r); sys.exit(0)
except Exception as e:
    print("loading %s" % type(e).__name__); sys.exit(0)
try:
    _, body = get("/v1/models", p.get("key"))
    names = [m.get("id") for m in json.loads(body).get("data", [])]
except Exception as e:
    print("no-model %s" % e); sys.exit(0)
print("ready" if p["model"] in names else "no-model listed=%s" % ",".join(map(str, names)))
"""


def _probe(ctx: HostContext, unit: str) -> tuple[str, int]:
    """One SSH round trip: systemd's ActiveState and NRestarts for the unit, then the HTTP
    probe. NRestarts growing while we wait means vLLM crashed and Restart=on-failure brought
    it back: a failure to start, not slow loading."""
    cfg: HostConfig = ctx.config
    params = json.dumps({"port": cfg.vllm_port, "model": cfg.served_model_name, "key": cfg.api_key})
    r = ctx.run(
        f"systemctl show -p ActiveState,NRestarts -- {q(unit)}; {q(cfg.vllm_python)} -c {q(PROBE)}",
        stdin=params,
        timeout=30,
    )
    props: dict[str, str] = {}
    lines: list[str] = []
    for ln in r.stdout.splitlines():
        key, sep, value = ln.partition("=")
        if sep and key in ("ActiveState", "NRestarts"):
            props[key] = value
        elif ln.strip():
            lines.append(ln.strip())
    active = props.get("ActiveState", "unknown")
    nrestarts = int(props["NRestarts"]) if props.get("NRestarts", "").isdigit() else 0
    state = lines[-1] if lines else "unknown"
    if active in ("failed", "inactive") and not state.startswith("ready"):
        state = f"dead ({active})"
    return state, nrestarts


def probe(ctx: HostContext, unit: str | None = None) -> str:
    """The host's readiness state (see the module docstring)."""
    return _probe(ctx, unit or ctx.config.unit)[0]


def wait_ready(ctx: HostContext, *, timeout: float | None = None, unit: str | None = None) -> float:
    """Block until the host serves its model; returns seconds waited. Fails the host with the
    last journal lines and their triage class (vfleet/roles/triage/) when the unit dies or the
    timeout passes."""
    cfg: HostConfig = ctx.config
    unit = unit or cfg.unit
    timeout = float(timeout or cfg.ready_timeout)
    t0 = time.monotonic()
    restarts_before: int | None = None

    def attempt() -> str:
        nonlocal restarts_before
        state, nrestarts = _probe(ctx, unit)
        if restarts_before is None:
            restarts_before = nrestarts
        elif state != "ready" and nrestarts > restarts_before:
            state = "dead (crashed and was restarted by systemd)"
        ctx.progress(time.monotonic() - t0, timeout, f"ready? {state.split()[0] if state else state}")
        return state

    retryer = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(2),
        retry=retry_if_result(lambda s: not (s == "ready" or s.startswith("dead"))),
        retry_error_callback=lambda rs: rs.outcome.result(),
    )
    state = retryer(attempt)
    if state == "ready":
        return time.monotonic() - t0
    why = "the unit died" if state.startswith("dead") else f"not ready after {timeout:g}s (last: {state})"
    journal = failure_journal(ctx, unit)  # its class and short next step join the message
    raise HostFailed(f"vLLM on {ctx.name}: {why}{journal.seen()}; journal: {journal.tail()}", journal.data())
