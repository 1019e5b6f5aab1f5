"""Render the vLLM systemd unit and its EnvironmentFile from a HostConfig (pure, no SSH).

    rendered = render_service(cfg, flag_available, nccl_env=topology["nccl_env"],
                              systemd_version=252)

Every value comes from the HostConfig (the schema's defaults, one derivation of paths and
names); this module only decides how they are spelled in a unit file. Values are quoted
for their target by the filters of vfleet/config/quoting.py; a value that cannot be expressed
safely is a RenderError, never a silently different unit. No secret is in the unit: the API
key and the Hugging Face token live in the 0600 environment file only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from vfleet.config.hostconfig import HostConfig
from vfleet.config.quoting import QuotingError, env_name
from vfleet.roles.service._argv import ArgvError, FlagCheck, VllmArgv, vllm_argv
from vfleet.templates.environment import environment

__all__ = [
    "RenderError",
    "RenderedService",
    "render_service",
    "render_unit",
    "render_env",
    "env_items",
    "unit_environment",
    "exec_lines",
    "stop_timeout",
    "ENV_FILE_MODE",
    "UNIT_FILE_MODE",
]

ENV_FILE_MODE = 0o600
UNIT_FILE_MODE = 0o644
# RestartSteps= / RestartMaxDelaySec= came in systemd 254; Debian 12 has 252.
SYSTEMD_RESTART_STEPS_MIN = 254
# Restart policy: back off on a crash loop, give up after START_LIMIT_BURST tries in the window.
RESTART_SEC = 10
RESTART_STEPS = 5
RESTART_MAX_DELAY_SEC = 120
START_LIMIT_INTERVAL_SEC = 600
START_LIMIT_BURST = 5
# TimeoutStopSec: vLLM's own drain (--shutdown-timeout) plus this margin; without the flag,
# a plain default.
STOP_TIMEOUT_MARGIN_SEC = 30
STOP_TIMEOUT_DEFAULT_SEC = 60

# Environment variables the renderer owns: vllm_env may not set them behind its back.
RESERVED_ENV = {"VLLM_API_KEY", "HF_TOKEN"}
DEFAULT_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# EnvironmentFile= takes a path, unquoted; systemd ignores a quoted one ("path is not
# absolute") and the service would then start without its API key.
_ENV_FILE_PATH = re.compile(r"/[A-Za-z0-9_./@+-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class RenderError(ValueError):
    pass


def _check_account(name: str, value: str) -> None:
    if not re.fullmatch(r"[a-z_][a-z0-9_-]*", value):
        raise RenderError(f"{name}: {value!r} is not a valid user/group name")


def exec_lines(argv: list[str]) -> list[list[str]]:
    """Group argv for readability: the start command (`python -m module` or `vllm serve
    MODEL`, three words either way), then one flag (with its value) per line."""
    lines = [list(argv[:3])]
    for word in argv[3:]:
        if word.startswith("-") or len(lines) == 1 or len(lines[-1]) > 1 or not lines[-1][0].startswith("-"):
            lines.append([word])
        else:
            lines[-1].append(word)
    return lines


def _command(cfg: HostConfig, flag_available: FlagCheck) -> VllmArgv:
    try:
        return vllm_argv(cfg, flag_available)
    except ArgvError as exc:
        raise RenderError(str(exc)) from None


def _stop_timeout(cfg: HostConfig, command: VllmArgv) -> int:
    drains = "--shutdown-timeout" in command.argv
    return cfg.shutdown_timeout + STOP_TIMEOUT_MARGIN_SEC if drains else STOP_TIMEOUT_DEFAULT_SEC


def stop_timeout(cfg: HostConfig, flag_available: FlagCheck) -> int:
    """TimeoutStopSec: vLLM's own drain time plus a margin, when the version drains."""
    return _stop_timeout(cfg, _command(cfg, flag_available))


def unit_environment(cfg: HostConfig) -> list[tuple[str, str]]:
    """The unit's own Environment= pairs. One function for the unit and for the compile-cache
    key (vfleet/roles/compile_cache/_key.py): vLLM 0.20 hashes VLLM_CONFIG_ROOT (from HOME) and
    VLLM_XLA_CACHE_PATH (from XDG_CACHE_HOME) into its torch.compile cache key, so these paths
    must be the same on every host that shares a cache, and must be what the unit says."""
    return [
        ("HOME", cfg.state_dir),
        ("XDG_CACHE_HOME", cfg.cache_dir),
        ("VLLM_CACHE_ROOT", cfg.vllm_cache_root),
        ("HF_HOME", f"{cfg.cache_dir}/huggingface"),
    ]


def _unit_text(cfg: HostConfig, command: VllmArgv, systemd_version: int | None) -> str:
    _check_account("vllm_user", cfg.vllm_user)
    _check_account("vllm_group", cfg.vllm_group)
    if not _ENV_FILE_PATH.fullmatch(cfg.env_file):
        raise RenderError(
            f"vllm_env_file: {cfg.env_file!r} must be an absolute path of letters, "
            "digits and ._/@+- (systemd's EnvironmentFile= takes no quoting)"
        )
    steps = systemd_version is not None and systemd_version >= SYSTEMD_RESTART_STEPS_MIN
    ctx = {
        "served_model_name": cfg.served_model_name,
        "vllm_version": cfg.vllm_version,
        "vllm_user": cfg.vllm_user,
        "vllm_group": cfg.vllm_group,
        "env_file": cfg.env_file,
        "service_name": cfg.service_name,
        "state_dir": cfg.state_dir,
        "unit_env": unit_environment(cfg),
        "exec_lines": exec_lines(command.argv),
        "timeout_stop_sec": _stop_timeout(cfg, command),
        "restart_sec": RESTART_SEC,
        "restart_steps": RESTART_STEPS if steps else None,
        "restart_max_delay_sec": RESTART_MAX_DELAY_SEC,
        "start_limit_interval_sec": START_LIMIT_INTERVAL_SEC,
        "start_limit_burst": START_LIMIT_BURST,
    }
    try:
        return environment().get_template("vllm.service.j2").render(**ctx)
    except QuotingError as e:
        raise RenderError(str(e)) from None


def render_unit(cfg: HostConfig, flag_available: FlagCheck, *, systemd_version: int | None = None) -> str:
    """The text of <service_name>.service. RestartSteps= only where systemd knows it."""
    return _unit_text(cfg, _command(cfg, flag_available), systemd_version)


def env_items(cfg: HostConfig, nccl_env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Ordered (KEY, VALUE) pairs of the environment file: offline defaults, the NCCL
    decision (the inventory's nccl_env replaces preflight's), vllm_env, then the secrets."""
    items: dict[str, str] = dict(DEFAULT_ENV)
    chosen = cfg.nccl_env if cfg.nccl_env is not None else (nccl_env or {})
    for k, val in chosen.items():
        if not str(k).startswith("NCCL_"):
            raise RenderError(f"nccl_env: {k!r} is not an NCCL_ variable")
        items[env_name(k)] = str(val)
    if cfg.cpu_kvcache_space_gib is not None:
        items["VLLM_CPU_KVCACHE_SPACE"] = str(cfg.cpu_kvcache_space_gib)
    if cfg.cuda_visible_devices is not None:
        cvd = cfg.cuda_visible_devices
        items["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, cvd)) if isinstance(cvd, tuple) else str(cvd)
    for k, val in cfg.vllm_env.items():
        if k in RESERVED_ENV:
            raise RenderError(f"vllm_env: {k} is set by vfleet (from api_key / hf_token)")
        items[env_name(k)] = str(val)
    if cfg.api_key is not None:
        items["VLLM_API_KEY"] = cfg.api_key
    if cfg.hf_token is not None:
        items["HF_TOKEN"] = cfg.hf_token
    return list(items.items())


def render_env(cfg: HostConfig, nccl_env: Mapping[str, str] | None = None) -> str:
    """The text of the EnvironmentFile (write it mode 0600). Secrets are checked before
    templating, so no error message ever carries their value."""
    for name, secret in (("api_key", cfg.api_key), ("hf_token", cfg.hf_token)):
        if secret is not None and _CONTROL.search(secret):
            raise RenderError(
                f"{name} holds a control character such as a newline (its value is not shown); keep it on one line"
            )
    items = env_items(cfg, nccl_env)
    try:
        return environment().get_template("vllm.env.j2").render(env_items=items)
    except QuotingError as e:
        raise RenderError(str(e)) from None


@dataclass
class RenderedService:
    unit_path: str
    unit_text: str
    env_path: str
    env_text: str = field(repr=False)
    dropped_flags: list[str] = field(default_factory=list)


def render_service(
    cfg: HostConfig,
    flag_available: FlagCheck,
    *,
    nccl_env: Mapping[str, str] | None = None,
    systemd_version: int | None = None,
) -> RenderedService:
    """Unit and environment file of one host, and the inventory flags the version lacks (the
    command line is worked out once for both)."""
    command = _command(cfg, flag_available)
    return RenderedService(
        unit_path=cfg.unit_path,
        unit_text=_unit_text(cfg, command, systemd_version),
        env_path=cfg.env_file,
        env_text=render_env(cfg, nccl_env),
        dropped_flags=command.dropped,
    )
