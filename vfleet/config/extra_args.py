"""vllm_extra_args and vllm_env checked against what vfleet manages, the pinned vLLM's own
flag list, secrets, and the protection-widening features of vfleet/config/unsafe_features.py.

Why at inventory load: an extra flag that repeats one vfleet renders wins (argparse keeps the
last value), so the gateway, smoke, preflight and the planner would describe a server other
than the one running; a secret on the command line lands in the 0644 unit and in `ps`; a
feature that widens vLLM's protection must be asked for by name. All of that is known from the
inventory alone, so `inventory`, `render`, `preflight` and `deploy` refuse it before the first
change on any host. Errors never echo a value.

    check_extra_args(cfg)    -> ["vars.vllm_extra_args: --port is managed by vfleet; set vllm_port instead", ...]
    fleet_errors(configs)    -> the same, one line per problem, naming the hosts
    unsafe_warnings(cfg)     -> one line per opted-in feature (and trust_remote_code)
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Mapping

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig
from vfleet.config.managed_flags import REPLICA, managed_flags
from vfleet.config.unsafe_features import TRUST_REMOTE_CODE, UNSAFE_FEATURES, env_is_on
from vfleet.config.vllm_flags import FlagList, Reading, flag_list, read_word

__all__ = ["check_extra_args", "fleet_errors", "unsafe_warnings", "features_in_use", "readings"]

ARGS, ENV = "vars.vllm_extra_args", "vars.vllm_env"
SECURITY_DOC = "docs/security.md"

# secrets vLLM takes as flags -> the variable that puts them in the 0600 environment file
_SECRET_FLAGS = {
    "--api-key": "the API key goes in the environment file (0600); set api_key (or api_key_file) instead",
    "--hf-token": "the token goes in the environment file (0600); set hf_token (or hf_token_file) instead",
}
# a name that says it carries one (not --allow-credentials, a switch; not --max-num-batched-tokens)
_SECRET_WORDS = re.compile(r"(^|-)(secret|password|passwd)s?(-|$)|(^|-)(api-?key|key|token)$")

# flags vfleet renders nothing for, but which change what serves where
_NOT_MODELLED = {
    "--config": "it reads options from a file, which could set any flag vfleet manages; give each "
    "option in vllm_extra_args or its variable instead",
    "--uds": "vLLM then ignores --host and --port, and the gateway, smoke and readiness reach vllm_host:vllm_port",
    "--grpc": "vLLM then serves gRPC, not HTTP, on vllm_port",
    "--grpc-port": "it opens a second (gRPC) port the gateway and vfleet's checks do not know",
    "--data-parallel-size": "vfleet plans one engine of tensor_parallel_size x pipeline_parallel_size "
    "GPUs per host (capacity, preflight, the gateway)",
    **{
        f: "the gateway, smoke and readiness speak plain HTTP to vLLM; terminate TLS at the gateway"
        for f in ("--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs", "--ssl-cert-reqs", "--enable-ssl-refresh")
    },
}
# environment vfleet writes from a variable (the secrets VLLM_API_KEY and HF_TOKEN are refused by
# the env-file renderer: they stay in the 0600 file either way, and `vfleet inventory` shows them masked)
_MANAGED_ENV = {"CUDA_VISIBLE_DEVICES": "cuda_visible_devices", "VLLM_CPU_KVCACHE_SPACE": "cpu_kvcache_space_gib"}


def readings(words: Iterable[str], flags: FlagList) -> Iterator[tuple[str, Reading | None]]:
    """(word, how vLLM reads it) for each option word; a word with a space is read by its first
    part (vLLM would take the whole as one unknown word)."""
    for i, word in enumerate(words):
        first = word.split()[0] if word.strip() else word
        yield word, read_word(i, first, flags)


def _looks_secret(name: str) -> bool:
    return bool(_SECRET_WORDS.search(name.lstrip("-").lower().replace("_", "-")))


def _shown(r: Reading) -> str:
    """The flag as the operator wrote it, with what vLLM reads it as when that differs."""
    plain = len(r.canonical) != 1 or r.spelled == r.canonical[0] or r.spelled.startswith("--no-")
    return r.spelled if plain else f"{r.spelled} ({r.canonical[0]})"


def _secret(r: Reading) -> str | None:
    for flag in (*r.canonical, *r.options):
        if flag in _SECRET_FLAGS:
            return f"{ARGS}: {flag} would put a secret in the unit file (0644) and in `ps`: {_SECRET_FLAGS[flag]}"
    glued = r.spelled.lower().replace("_", "-")
    if any(glued.startswith(flag) for flag in _SECRET_FLAGS):  # `--api-keySK...`: vLLM refuses it, we never echo it
        flag = next(f for f in _SECRET_FLAGS if glued.startswith(f))
        return f"{ARGS}: {flag}... would put a secret in the unit file (0644) and in `ps`: {_SECRET_FLAGS[flag]}"
    if any(_looks_secret(n) for n in (r.spelled, *r.canonical)):
        return (
            f"{ARGS}: {r.spelled} looks like a secret, which the unit file (0644) and `ps` would show; "
            f"pass it in vllm_env (the 0600 environment file) if vLLM reads it from there"
        )
    return None


def _version_problem(cfg: HostConfig, r: Reading, flags: FlagList) -> str | None:
    """A flag the pinned release lacks: unknown to its captured help (the truth for that
    release), ambiguous there, or, for a release without a capture, removed / not yet added by
    the facts table (vllm_facts.yaml flags:)."""
    version = cfg.vllm_version
    if len(r.canonical) > 1 and flags.authoritative:
        return f"{ARGS}: {r.spelled} is ambiguous in vLLM {version} ({', '.join(r.options[:4])}); spell the flag out"
    if not r.options and flags.authoritative:
        return f"{ARGS}: vLLM {version} does not accept {r.spelled[:60]}"
    for flag in r.options if len(r.canonical) == 1 and not flags.authoritative else ():
        if flag.startswith("--no-"):
            continue  # the table's no_form says what vfleet may render, not what a release lacks
        row = vllm_facts.flag_row(flag) or {}
        status = vllm_facts.flag_status(flag, version)
        if version and status in ("removed", "not-yet"):
            why = (
                f"removed in {row['removed']}" + (f"; use {row['replaced_by']}" if row.get("replaced_by") else "")
                if status == "removed"
                else f"added in {row.get('added') or 'a later release'}"
            )
            return f"{ARGS}: vLLM {version} does not accept {flag} ({why})"
    return None


def _flag_problem(cfg: HostConfig, r: Reading, word: str, flags: FlagList, managed: Mapping[str, str]) -> str | None:
    if word == "--":
        return f"{ARGS}: a bare '--' makes vLLM read every later word as a model name; remove it"
    problem = _secret(r) or _version_problem(cfg, r, flags)
    if problem:
        return problem
    for opt in (*r.options, *r.canonical):
        if opt in managed:
            return f"{ARGS}: {_shown(r)} is managed by vfleet; set {managed[opt]} instead"
        if opt in _NOT_MODELLED:
            return f"{ARGS}: {_shown(r)} is refused: {_NOT_MODELLED[opt]}"
    if " " in word.strip() or "\t" in word:
        return (
            f"{ARGS}: '{r.spelled} ...' is one item with a space, which vLLM reads as one unknown word; "
            "give the flag and its value as two items"
        )
    return None


def _unsafe(cfg: HostConfig, feature: str, what: str, where: str) -> str | None:
    if feature in cfg.vllm_allow_unsafe:
        return None
    return (
        f"{where}: {what} widens vLLM's protection ({UNSAFE_FEATURES[feature].opens}); add "
        f"'{feature}' to vllm_allow_unsafe if you mean it (see {SECURITY_DOC})"
    )


def _flag_feature(r: Reading) -> str | None:
    if r.negative or len(r.canonical) != 1:
        return None
    return next((name for name, f in UNSAFE_FEATURES.items() if r.canonical[0] in f.flags), None)


def features_in_use(cfg: HostConfig) -> dict[str, list[str]]:
    """{feature: [the flags / variables that switch it on]} for this config."""
    used: dict[str, list[str]] = {}
    for _word, r in readings(cfg.vllm_extra_args, flag_list(cfg.vllm_version)):
        feature = r and _flag_feature(r)
        if feature:
            used.setdefault(feature, []).append(r.canonical[0])
    for key, value in cfg.vllm_env.items():
        for name, f in UNSAFE_FEATURES.items():
            if key in f.env and env_is_on(value):
                used.setdefault(name, []).append(key)
    return used


def _arg_errors(cfg: HostConfig, replica_flags: bool) -> list[str]:
    flags = flag_list(cfg.vllm_version)
    managed = managed_flags()
    if replica_flags:  # the replica renderer's own flags, already in the words it hands over
        managed = {k: v for k, v in managed.items() if k not in REPLICA}
    out: list[str] = []
    after_secret = False
    for word, r in readings(cfg.vllm_extra_args, flags):
        if after_secret and not word.startswith("--"):
            continue  # a secret flag's value(s): never looked at, so never echoed
        after_secret = False
        if r is None:
            continue
        problem = _flag_problem(cfg, r, word, flags, managed)
        after_secret = bool(_secret(r)) and "=" not in word
        if problem is None:
            feature = _flag_feature(r)
            problem = feature and _unsafe(cfg, feature, r.canonical[0], ARGS)
        if problem and problem not in out:
            out.append(problem)
    return out


def _env_errors(cfg: HostConfig) -> list[str]:
    out: list[str] = []
    for key, value in cfg.vllm_env.items():
        if key in _MANAGED_ENV:
            out.append(f"{ENV}: {key} is managed by vfleet; set {_MANAGED_ENV[key]} instead")
            continue
        for name, f in UNSAFE_FEATURES.items():
            problem = key in f.env and env_is_on(value) and _unsafe(cfg, name, key, ENV)
            if problem:
                out.append(problem)
    return out


def check_extra_args(cfg: HostConfig, *, replica_flags: bool = False) -> list[str]:
    """Every problem of the host's vllm_extra_args and vllm_env, one line each (no values).
    `replica_flags`: the words come from the replica renderer, which adds its own
    --distributed-executor-backend, --nnodes, ... to the inventory's."""
    return _arg_errors(cfg, replica_flags) + _env_errors(cfg)


def fleet_errors(configs: Iterable[HostConfig]) -> list[str]:
    """check_extra_args over the fleet, each problem once with the hosts that have it (a group
    variable repeats it on every host): "hosts gpu01, gpu02: vars.vllm_extra_args: ..."."""
    hosts: dict[str, list[str]] = {}
    seen: dict[tuple, list[str]] = {}  # hosts of one group share their words: read them once
    for cfg in configs:
        key = (cfg.vllm_version, cfg.vllm_extra_args, tuple(cfg.vllm_env.items()), cfg.vllm_allow_unsafe)
        if key not in seen:
            seen[key] = check_extra_args(cfg)
        for problem in seen[key]:
            hosts.setdefault(problem, []).append(cfg.name)
    out = []
    for problem, names in hosts.items():
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        out.append(f"host{'s' if len(names) > 1 else ''} {shown}: {problem}")
    return out


def unsafe_warnings(cfg: HostConfig) -> list[str]:
    """One line per protection-widening feature this host runs with (each opted in, or it would
    not have loaded), and trust_remote_code: what preflight and smoke print."""
    lines = [
        f"vllm_allow_unsafe: {name} ({', '.join(dict.fromkeys(how))}): {UNSAFE_FEATURES[name].opens}"
        for name, how in sorted(features_in_use(cfg).items())
    ]
    if cfg.trust_remote_code:
        lines.append(TRUST_REMOTE_CODE)
    return lines
