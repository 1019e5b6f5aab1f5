"""Where on a host the preflight facts look, from the host's typed config.

Its own module because both the fact commands (what to `cat`, where to `df`) and the facts
dict (`paths` in the report) need the same answers: one definition keeps them from drifting."""

from __future__ import annotations

from vfleet.config.hostconfig import HostConfig


def model_dir(cfg: HostConfig) -> str:
    """The model's folder on the host, as the service renderer sees it (HostConfig's
    model_path), else model_dir itself when no model is named yet."""
    return cfg.model_path or cfg.model_dir.rstrip("/") or "/"


def report_paths(cfg: HostConfig) -> dict[str, str]:
    """The facts dict's `paths`: the folders and file the facts were read from."""
    return {"model_dir": model_dir(cfg), "env_file": cfg.env_file, "vllm_root": cfg.vllm_root.rstrip("/")}
