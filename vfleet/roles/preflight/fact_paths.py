"""Paths the preflight facts look at on a host, all overridable from inventory vars.

Their own module because both the fact commands (what to `cat`, where to `df`) and the facts
dict (`paths` in the report) need the same answers: one definition keeps them from drifting."""
from __future__ import annotations

from typing import Any


def model_dir(vars: dict[str, Any]) -> str:
    """The model's folder on the host, as the service renderer sees it (HostConfig's
    model_path), else the parent itself when no model is named yet."""
    if vars.get("model_path"):
        return str(vars["model_path"])
    parent = str(vars.get("model_dir") or "/srv/models").rstrip("/") or "/"
    name = vars.get("model_name")
    return f"{parent}/{name}" if name else parent


def vllm_root(vars: dict[str, Any]) -> str:
    return str(vars.get("vllm_root") or "/opt/vllm").rstrip("/")


def service_name(vars: dict[str, Any]) -> str:
    return str(vars.get("service_name") or "vllm")


def env_file_path(vars: dict[str, Any]) -> str:
    """The service's environment file: `vllm_env_file`, else /etc/vllm/<service>.env."""
    return str(vars.get("vllm_env_file") or f"/etc/vllm/{service_name(vars)}.env")
