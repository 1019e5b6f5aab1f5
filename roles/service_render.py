"""Render the vLLM systemd unit and its EnvironmentFile (pure functions, no SSH).

    unit_text = render_unit(vars, flag_available=vllm_facts.flag_available)
    env_text  = render_env(vars, api_key=secret, nccl_env=topology_decision["nccl_env"])

Inventory variables read (defaults in DEFAULTS):
  vllm_version (required)            the pinned version, passed to flag_available
  vllm_root                          venvs live under it; ExecStart uses <vllm_root>/current
  model_dir, model_name              the model is served from <model_dir>/<model_name>
                                     (model_path overrides the join)
  served_model_name                  defaults to model_name
  vllm_host (else vllm_bind), vllm_port, dtype, tensor_parallel_size, max_model_len,
  gpu_memory_utilization, max_num_seqs, shutdown_timeout     -> the same-named flags;
                                     None (or absent) = flag not rendered
  vllm_extra_args                    list of extra argv words, e.g. ["--enforce-eager"],
                                     or a mapping flag -> value (True: bare flag,
                                     None/False: omitted), e.g. {"--enforce-eager": True}
  vllm_env                           dict of extra environment variables (env file)
  cpu_kvcache_space_gib              -> VLLM_CPU_KVCACHE_SPACE (CPU builds)
  vllm_user, vllm_group              the dedicated service account
  service_name                       unit name without .service (default "vllm")
  vllm_env_file                      path of the EnvironmentFile (default
                                     /etc/vllm/<service_name>.env)
  api_key                            (secret) -> VLLM_API_KEY in the env file only
  nccl_env                           inventory override of the preflight NCCL decision
  restart_sec, start_limit_interval_sec, start_limit_burst, stop_timeout_margin_sec,
  stop_timeout_default_sec, systemd_version

Flags the pinned version does not accept (flag_available(flag, version) is False) are not
rendered: a standard flag set in the inventory is dropped and reported in
``exec_args(...)[1]``; a flag in vllm_extra_args that the version rejects is an error
(RenderError), since the service would crash-loop on it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Collection, Mapping, Sequence, Union

import jinja2

from roles.quoting import FILTERS, QuotingError, env_name

FlagCheck = Union[Callable[[str, str], bool], Collection[str]]

UNIT_NAME = "vllm.service"
ENV_FILE_MODE = 0o600
UNIT_FILE_MODE = 0o644
# RestartSteps= / RestartMaxDelaySec= came in systemd 254; Debian 12 has 252.
SYSTEMD_RESTART_STEPS_MIN = 254

DEFAULTS: dict = {
    "vllm_root": "/opt/vllm",
    "model_dir": "/srv/models",
    "vllm_host": None,
    "vllm_bind": "0.0.0.0",
    "service_name": "vllm",
    "vllm_port": 8000,
    "dtype": None,
    "tensor_parallel_size": None,
    "max_model_len": None,
    "gpu_memory_utilization": None,
    "max_num_seqs": None,
    "shutdown_timeout": 30,
    "vllm_extra_args": [],
    "vllm_env": {},
    "cpu_kvcache_space_gib": None,
    "vllm_user": "vllm",
    "vllm_group": "vllm",
    "vllm_env_file": None,
    "restart_sec": 10,
    "restart_steps": 5,
    "restart_max_delay_sec": 120,
    "start_limit_interval_sec": 600,
    "start_limit_burst": 5,
    "stop_timeout_margin_sec": 30,
    "stop_timeout_default_sec": 60,
    "systemd_version": 252,
}

# inventory variable -> vLLM flag, in the order they appear on the command line
FLAG_VARS: tuple[tuple[str, str], ...] = (
    ("served_model_name", "--served-model-name"),
    ("vllm_host", "--host"),
    ("vllm_port", "--port"),
    ("dtype", "--dtype"),
    ("tensor_parallel_size", "--tensor-parallel-size"),
    ("max_model_len", "--max-model-len"),
    ("gpu_memory_utilization", "--gpu-memory-utilization"),
    ("max_num_seqs", "--max-num-seqs"),
    ("shutdown_timeout", "--shutdown-timeout"),
)

# Environment variables the renderer owns: vllm_env may not set them behind its back.
RESERVED_ENV = {"VLLM_API_KEY"}
DEFAULT_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

_NAME = re.compile(r"[a-z_][a-z0-9_-]*[$]?")


class RenderError(ValueError):
    pass


def _flag_check(flag_available: FlagCheck) -> Callable[[str, str], bool]:
    if callable(flag_available):
        return flag_available
    accepted = frozenset(flag_available)
    return lambda flag, version: flag in accepted


def merged_vars(vars: Mapping) -> dict:
    """DEFAULTS overlaid with vars; a None in vars means "unset" (keeps the default)."""
    v = dict(DEFAULTS)
    v.update({k: val for k, val in vars.items() if val is not None})
    if not v.get("vllm_host"):
        v["vllm_host"] = v.get("vllm_bind") or "0.0.0.0"
    if not re.fullmatch(r"[A-Za-z0-9_.@-]+", str(v["service_name"])):
        raise RenderError(f"service_name: {v['service_name']!r} is not a unit name")
    if not v.get("vllm_env_file"):
        v["vllm_env_file"] = f"/etc/vllm/{v['service_name']}.env"
    if not v.get("vllm_version"):
        raise RenderError("vllm_version is required")
    if not v.get("model_path"):
        if not v.get("model_name"):
            raise RenderError("model_name (or model_path) is required")
        v["model_path"] = str(PurePosixPath(v["model_dir"]) / str(v["model_name"]))
    if not v.get("served_model_name"):
        v["served_model_name"] = v.get("model_name") or PurePosixPath(v["model_path"]).name
    for key in ("vllm_root", "model_path", "vllm_env_file"):
        if not str(v[key]).startswith("/"):
            raise RenderError(f"{key} must be an absolute path, got {v[key]!r}")
    for key in ("vllm_user", "vllm_group"):
        if not _NAME.fullmatch(str(v[key])):
            raise RenderError(f"{key}: {v[key]!r} is not a valid user/group name")
    return v


def exec_args(vars: Mapping, flag_available: FlagCheck) -> tuple[list[str], list[str]]:
    """(argv of ExecStart, flags dropped because the pinned version lacks them)."""
    v = merged_vars(vars)
    ok = _flag_check(flag_available)
    version = str(v["vllm_version"])
    python = str(PurePosixPath(v["vllm_root"]) / "current" / "bin" / "python")
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", v["model_path"]]
    dropped: list[str] = []
    for var, flag in FLAG_VARS:
        value = v.get(var)
        if value is None or value == "":
            continue
        if var == "shutdown_timeout" and not ok(flag, version):
            dropped.append(flag)
            continue
        if not ok(flag, version):
            dropped.append(flag)
            continue
        argv += [flag, str(value)]
    extra = v.get("vllm_extra_args") or []
    if isinstance(extra, str):
        raise RenderError("vllm_extra_args must be a list of words, not a string")
    if isinstance(extra, Mapping):
        words: list[str] = []
        for flag, value in extra.items():
            flag = str(flag) if str(flag).startswith("-") else "--" + str(flag)
            if value is None or value is False:
                continue
            words += [flag] if value is True else [flag, str(value)]
        extra = words
    for word in extra:
        word = str(word)
        if word.startswith("--"):
            flag = word.split("=", 1)[0]
            base = "--" + flag[5:] if flag.startswith("--no-") else flag
            if not (ok(flag, version) or ok(base, version)):
                raise RenderError(f"vllm_extra_args: vLLM {version} does not accept {flag}")
            if flag == "--api-key":
                raise RenderError("vllm_extra_args: the API key goes in the environment "
                                  "file (VLLM_API_KEY), never on the command line")
        argv.append(word)
    return argv, dropped


def exec_lines(argv: Sequence[str]) -> list[list[str]]:
    """Group argv for readability: the interpreter and module, then one flag (with its
    value, when the next word is not a flag) per line."""
    lines = [list(argv[:3])]
    for word in argv[3:]:
        if word.startswith("-") or len(lines) == 1 or len(lines[-1]) > 1 \
                or not lines[-1][0].startswith("-"):
            lines.append([word])
        else:
            lines[-1].append(word)
    return lines


def stop_timeout(vars: Mapping, flag_available: FlagCheck) -> int:
    """TimeoutStopSec: vLLM's own drain time plus a margin, when the version drains."""
    v = merged_vars(vars)
    has = _flag_check(flag_available)("--shutdown-timeout", str(v["vllm_version"]))
    st = v.get("shutdown_timeout")
    if has and st is not None:
        return int(st) + int(v["stop_timeout_margin_sec"])
    return int(v["stop_timeout_default_sec"])


def _jinja_env() -> jinja2.Environment:
    here = Path(__file__).resolve().parent.parent / "templates"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(here)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env


def render_unit(vars: Mapping, flag_available: FlagCheck) -> str:
    """The text of vllm.service."""
    v = merged_vars(vars)
    argv, _ = exec_args(v, flag_available)
    restart_steps = (v["restart_steps"]
                     if int(v["systemd_version"]) >= SYSTEMD_RESTART_STEPS_MIN else None)
    ctx = {
        "served_model_name": v["served_model_name"],
        "vllm_version": v["vllm_version"],
        "vllm_user": v["vllm_user"],
        "vllm_group": v["vllm_group"],
        "env_file": v["vllm_env_file"],
        "exec_lines": exec_lines(argv),
        "timeout_stop_sec": stop_timeout(v, flag_available),
        "restart_sec": int(v["restart_sec"]),
        "restart_steps": restart_steps,
        "restart_max_delay_sec": int(v["restart_max_delay_sec"]),
        "start_limit_interval_sec": int(v["start_limit_interval_sec"]),
        "start_limit_burst": int(v["start_limit_burst"]),
    }
    try:
        return _jinja_env().get_template("vllm.service.j2").render(**ctx)
    except QuotingError as e:
        raise RenderError(str(e)) from e


def env_items(vars: Mapping, api_key: str | None = None,
              nccl_env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Ordered (KEY, VALUE) pairs of the environment file."""
    v = merged_vars(vars)
    items: dict[str, str] = dict(DEFAULT_ENV)
    # the preflight topology decision, then the inventory's override of it
    for k, val in {**(nccl_env or {}), **(v.get("nccl_env") or {})}.items():
        if not str(k).startswith("NCCL_"):
            raise RenderError(f"nccl_env: {k!r} is not an NCCL_ variable")
        items[env_name(k)] = str(val)
    if v.get("cpu_kvcache_space_gib") is not None:
        items["VLLM_CPU_KVCACHE_SPACE"] = str(v["cpu_kvcache_space_gib"])
    for k, val in (v.get("vllm_env") or {}).items():
        if k in RESERVED_ENV:
            raise RenderError(f"vllm_env: {k} is set by vfleet (api key from the vault)")
        items[env_name(k)] = "" if val is None else (
            ("true" if val else "false") if isinstance(val, bool) else str(val))
    if api_key is None:
        api_key = v.get("api_key")
    if api_key is not None:
        if not str(api_key):
            raise RenderError("api_key is empty")
        items["VLLM_API_KEY"] = str(api_key)
    return list(items.items())


def render_env(vars: Mapping, api_key: str | None = None,
               nccl_env: Mapping[str, str] | None = None) -> str:
    """The text of the EnvironmentFile (write it mode 0600)."""
    try:
        return _jinja_env().get_template("vllm.env.j2").render(
            env_items=env_items(vars, api_key, nccl_env))
    except QuotingError as e:
        raise RenderError(str(e)) from e


@dataclass
class RenderedService:
    unit_path: str
    unit_text: str
    env_path: str
    env_text: str
    dropped_flags: list[str] = field(default_factory=list)
    unit_mode: int = UNIT_FILE_MODE
    env_mode: int = ENV_FILE_MODE


def render_service(vars: Mapping, flag_available: FlagCheck, api_key: str | None = None,
                   nccl_env: Mapping[str, str] | None = None,
                   unit_dir: str = "/etc/systemd/system") -> RenderedService:
    v = merged_vars(vars)
    _, dropped = exec_args(v, flag_available)
    return RenderedService(
        unit_path=f"{unit_dir}/{v['service_name']}.service",
        unit_text=render_unit(v, flag_available),
        env_path=str(v["vllm_env_file"]),
        env_text=render_env(v, api_key, nccl_env),
        dropped_flags=dropped,
    )
