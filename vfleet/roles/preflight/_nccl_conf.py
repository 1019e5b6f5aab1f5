"""NCCL variables the vLLM service picks up from files vfleet does not write: the service user's
~/.nccl.conf, the file NCCL_CONF_FILE names, the vLLM unit's systemd drop-ins and the environment
files they add (the `nccl_sources` fact, parsers/nccl_sources.py). /etc/nccl.conf and vfleet's
own environment file are check `nccl.env`'s (_topology_checks.py).

Why: a variable left there by someone's script changes how NCCL talks between the GPUs without
anything in the inventory saying so, and the symptom (an init that hangs, half the all-reduce
bandwidth) appears far from its cause; vfleet's triage names it after the fact, this check before.

Which values reach NCCL (what decides whether a line matters):
- ~/.nccl.conf only while NCCL_CONF_FILE is unset or empty: NCCL reads the file it names instead
  (param.cc initEnvFunc, if/else; /etc/nccl.conf is read after either, always), so the home file
  is not reported when the inventory, a drop-in or its environment file sets NCCL_CONF_FILE;
- NCCL takes a configuration file's lines literally (param.cc setEnvFile): a line such as
  `export NCCL_X=1` or `NCCL_X = 1` sets no NCCL variable, and is reported as a warning that it
  has no effect (whoever wrote it meant it to have one);
- configuration files (~/.nccl.conf, NCCL_CONF_FILE) fill only variables the process environment
  lacks (NVIDIA/nccl src/misc/param.cc setEnvFile: setenv without overwrite), and a drop-in's
  Environment= loses to the unit's EnvironmentFile= (systemd.exec(5)): both are overridden where
  the unit's environment sets the variable (the NCCL decision and the inventory's nccl_env);
- an environment file a drop-in adds is read after vfleet's and wins (systemd.exec(5)).
A line whose value reaches NCCL and differs from what the unit wants is reported.

Severity (NCCL user guide, Environment Variables, https://docs.nvidia.com/deeplearning/nccl/
user-guide/docs/env.html: the "Debugging" variables "should not be used in production nor
retained in scripts ... Keeping them set may result in sub-optimal behavior, crashes, or hangs"):
- fail: NCCL_P2P_DISABLE / NCCL_P2P_LEVEL / NCCL_SHM_DISABLE with TP > 1 (a disabled transport
  halves all-reduce bandwidth or worse on NVLink, vllm_facts.yaml nccl:), NCCL_SOCKET_IFNAME and
  NCCL_NET (NCCL bootstraps over that interface even on one host: a name that matches nothing
  fails or hangs the init), NCCL_ALGO / NCCL_PROTO (debugging variables), and NCCL_IB_DISABLE on
  a multi-host replica (its traffic falls back to TCP sockets);
- warn: NCCL_DEBUG at INFO or TRACE (floods the journal; WARN and VERSION are harmless),
  NCCL_DEBUG_SUBSYS / NCCL_DEBUG_FILE, any other NCCL variable, and names NCCL does not know.
"""

from __future__ import annotations

from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig

from ._check_base import FAIL, PASS, WARN, Check

__all__ = ["check_nccl_sources"]

TRANSPORT_VARS = {"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"}
ALWAYS_FAIL = {
    "NCCL_SOCKET_IFNAME": "NCCL bootstraps over that interface: a name matching nothing fails or hangs the init",
    "NCCL_NET": "forces one network plugin for every transport",
    "NCCL_ALGO": "a debugging variable (NCCL: may crash or hang if kept)",
    "NCCL_PROTO": "a debugging variable (NCCL: may crash or hang if kept)",
}
QUIET_DEBUG_LEVELS = {"WARN", "VERSION", ""}
LABELS = {
    "home": "the service user's ~/.nccl.conf",
    "conffile": "the file NCCL_CONF_FILE names",
    "dropin": "a drop-in of the vLLM unit",
    "envfile": "an environment file a drop-in adds",
}


def _severity(cfg: HostConfig, key: str, value: str) -> tuple[str, str]:
    """(status, why) of a variable that reaches NCCL with this value."""
    tp = cfg.tensor_parallel_size * cfg.pipeline_parallel_size
    if key.endswith("_DISABLE") and value == "0":
        return PASS, ""  # NCCL's own default: nothing switched off
    if key in TRANSPORT_VARS:
        if tp > 1:
            return FAIL, "switches an intra-host GPU transport off or down behind the topology decision"
        return WARN, "a transport setting (harmless with one GPU, wrong as soon as TP grows)"
    if key in ALWAYS_FAIL:
        return FAIL, ALWAYS_FAIL[key]
    if key == "NCCL_IB_DISABLE":
        if cfg.replica.name:
            return FAIL, "the replica's traffic between hosts falls back to TCP sockets"
        return WARN, "InfiniBand off (no effect within one host, slow if the host joins a replica)"
    if key == "NCCL_DEBUG":
        if value.upper() in QUIET_DEBUG_LEVELS:
            return PASS, ""
        return WARN, f"NCCL_DEBUG={value} floods the journal with NCCL's log"
    if key not in vllm_facts.nccl_table()["known_vars"] and key != "NCCL_CONF_FILE":
        return WARN, "not an NCCL variable (typo?)"
    return WARN, "silently changes NCCL's behaviour"


def _conf_file_set(cfg: HostConfig, unit_env: dict[str, str], sources: list[dict[str, Any]]) -> bool:
    """Whether the service runs with a non-empty NCCL_CONF_FILE, so NCCL skips ~/.nccl.conf."""
    named = [
        unit_env.get("NCCL_CONF_FILE"),
        (cfg.nccl_env or {}).get("NCCL_CONF_FILE"),
        cfg.vllm_env.get("NCCL_CONF_FILE"),
    ]
    named += [s["vars"].get("NCCL_CONF_FILE") for s in sources if s["kind"] in ("dropin", "envfile")]
    return any(named) or any(s["kind"] == "conffile" for s in sources)


def check_nccl_sources(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    sources = facts.get("nccl_sources")
    if sources is None:
        return None  # probe failed or an older snapshot: nothing known, nothing said
    unit_env = (facts.get("topology") or {}).get("nccl_env") or {}
    if _conf_file_set(cfg, unit_env, sources):
        sources = [s for s in sources if s["kind"] != "home"]
    found: list[tuple[str, str, str]] = []  # (status, problem, fix)
    for src in sources:
        wins = src["kind"] == "envfile"
        where = f"{src['path']} ({LABELS.get(src['kind'], src['kind'])})"
        found += [
            (
                WARN,
                f"'{ln}' in {where} has no effect: NCCL reads KEY=VALUE literally (no export, no spaces around '=')",
                f"remove that line from {src['path']}",
            )
            for ln in src.get("ignored", [])
        ]
        for key, value in sorted(src["vars"].items()):
            if key == "NCCL_CONF_FILE" or (not wins and key in unit_env) or unit_env.get(key) == value:
                continue
            status, why = _severity(cfg, key, value)
            if status == PASS:
                continue
            fix = f"remove {key} from {src['path']}" + (
                "" if wins else f", or set it in the inventory's nccl_env if it is meant ({key}: '{value}')"
            )
            found.append((status, f"{key}={value} in {where}: {why}", fix))
    if not found:
        paths = ", ".join(s["path"] for s in sources) or "none found"
        return Check("nccl.sources", PASS, f"no NCCL variable from other files reaches the service ({paths})")
    status = FAIL if any(s == FAIL for s, _, _ in found) else WARN
    return Check("nccl.sources", status, "; ".join(p for _, p, _ in found), "; ".join(f for _, _, f in found))
