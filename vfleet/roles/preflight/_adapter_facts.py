"""What preflight knows of a host's LoRA adapters and speculative draft model before any is
copied: each adapter's adapter_config.json and the shapes of its weights, the draft's
config.json and weight bytes, read from the controller's copy (a folder, or a hub source's
verified export, vfleet/roles/model_source/_payload.py).

    facts = with_adapters(facts, cfg)   # facts["lora_adapters"] = {name: {...} | {"error"}}
                                        # facts["speculative_draft"] = {"config", "weights_bytes"} | {"error"}

Kept apart from the checks (_adapter_checks.py, pure) so the checks are tested from data, and
read once per run like the model's own controller facts (model_facts.with_model_source)."""

from __future__ import annotations

from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError
from vfleet.engine.strict_json import JsonFileError
from vfleet.roles.model_source import adapter_config, draft_payload

from ._capacity import weights_bytes_from_dir
from ._model_files import read_config
from ._safetensors_header import read_shapes

__all__ = ["ADAPTER_WEIGHTS", "adapter_facts", "draft_facts", "with_adapters"]

ADAPTER_WEIGHTS = "adapter_model.safetensors"


def adapter_facts(cfg: HostConfig) -> dict[str, dict[str, Any]]:
    """{name: {"rank", "base", "shapes"}} per adapter, or {name: {"error": one line}} when its
    source cannot be read (a hub revision not in the cache, no adapter_config.json, a damaged
    header)."""
    out: dict[str, dict[str, Any]] = {}
    for adapter in cfg.lora_adapters:
        try:
            folder, config = adapter_config(cfg, adapter)
            weights = folder / ADAPTER_WEIGHTS
            out[adapter.name] = {
                "rank": config.get("r"),
                "base": config.get("base_model_name_or_path"),
                "shapes": read_shapes(weights) if weights.is_file() else None,
            }
        except (VfleetError, JsonFileError, OSError) as e:
            out[adapter.name] = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    return out


def draft_facts(cfg: HostConfig) -> dict[str, Any]:
    """{"config", "weights_bytes"} of the speculative draft model, or {"error": one line}."""
    try:
        folder = draft_payload(cfg).controller_folder()
        if folder is None or not (folder / "config.json").is_file():
            raise VfleetError(f"{cfg.speculative.source if cfg.speculative else None}: no config.json there")
        return {"config": read_config(folder / "config.json"), "weights_bytes": weights_bytes_from_dir(folder)}
    except (VfleetError, JsonFileError, OSError) as e:
        return {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}


def with_adapters(facts: dict[str, Any], cfg: HostConfig) -> dict[str, Any]:
    """`facts` with the host's adapters and speculative draft read (no key without them)."""
    out = {**facts, "lora_adapters": adapter_facts(cfg)} if cfg.lora_adapters else dict(facts)
    if cfg.speculative is not None and cfg.speculative.has_model:
        out["speculative_draft"] = draft_facts(cfg)
    return out
