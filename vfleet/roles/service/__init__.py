"""The vLLM systemd service: its argv, the unit and environment file, restart and readiness."""

from __future__ import annotations

from . import _measured_restart as measured_restart, _readiness as readiness, _unit as unit, _unit_files as unit_files
from ._argv import ArgvError, FlagCheck, vllm_argv
from ._lora_flags import RANK_CHOICES, lora_slots, max_lora_rank
from ._measured_restart import MeasuredRestart
from ._render import RenderError, env_items, exec_lines, render_env, render_service, render_unit, unit_environment
from ._unit import RESTART, ServiceOutcome, user_change
from ._unit_files import UnitFiles, owned_units, refusal

__all__ = [
    "ArgvError",
    "env_items",
    "exec_lines",
    "FlagCheck",
    "lora_slots",
    "max_lora_rank",
    "measured_restart",
    "MeasuredRestart",
    "owned_units",
    "RANK_CHOICES",
    "readiness",
    "refusal",
    "render_env",
    "render_service",
    "render_unit",
    "RenderError",
    "RESTART",
    "ServiceOutcome",
    "unit",
    "unit_environment",
    "unit_files",
    "UnitFiles",
    "user_change",
    "vllm_argv",
]
