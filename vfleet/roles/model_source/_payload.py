"""What the weights step copies, as one typed value: the model, one LoRA adapter of it, or its
speculative draft model.

    model_payload(cfg)                 # <model_dir>/<model_name> <- model_source
    adapter_payload(cfg, adapter)      # <model_dir>/lora/<name>  <- the adapter's source
    draft_payload(cfg)                 # <model_dir>/draft/<service_name> <- speculative_decoding.source

Why one type: an adapter is synced exactly like the weights (manifest, staging, verified
copies kept under .versions, an atomic link switch that restarts the service); only where its
copy lives, what its source folder must hold and how an error names it differ. _sync.py reads
a Payload, never the config's model fields, so both take the same path to the host.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from vfleet.config.hostconfig import HostConfig
from vfleet.config.lora import LoraAdapter
from vfleet.engine.errors import VfleetError
from vfleet.engine.strict_json import MIB, JsonFileError, mapping, read_json
from vfleet.roles.model_source import _hub as hub

__all__ = [
    "Payload",
    "model_payload",
    "adapter_payload",
    "adapter_payload_of",
    "draft_payload",
    "adapter_config",
    "hub_export",
    "adapter_rank",
    "ADAPTER_CONFIG",
]

ADAPTER_CONFIG = "adapter_config.json"


@dataclass(frozen=True)
class Payload:
    """One folder synced to a host: `variable` is what errors name, `stem` the name of its
    copies under .versions and .staging, `live` the link the service reads, `required` the
    file a controller folder must hold to be this kind of thing."""

    variable: str
    live_variable: str  # what an error about the live link names: model_path, lora_adapters[NAME]
    stem: str
    source: str | None
    revision: str | None
    live: str
    root: str
    required: str
    step: str  # the run's step names: "weights", "lora <name>"

    @property
    def key(self) -> str:
        """The files a host asks for, as one string: the source, with a hub source's revision
        written in (`hf://X` with revision v1 and `hf://X@v1` are the same files)."""
        spec = str(self.source)
        return hub.parse(spec, self.revision, self.variable).spec if hub.is_hub(spec) else spec

    def controller_folder(self) -> Path | None:
        """The folder on the controller the source names (a hub source: its verified export,
        resolved now), or None for a HOST:/path source, an unset or a missing one."""
        spec = self.source
        if hub.is_hub(spec):
            return hub_export(str(spec), self.revision, self.variable).folder
        if not spec or ":" in spec or not Path(spec).expanduser().is_dir():
            return None
        return Path(spec).expanduser()


def model_payload(cfg: HostConfig) -> Payload:
    return Payload(
        "model_source",
        "model_path",
        str(cfg.model_name),
        cfg.model_source,
        cfg.model_revision,
        str(cfg.model_path),
        cfg.model_dir,
        "config.json",
        "weights",
    )


def adapter_payload(cfg: HostConfig, adapter: LoraAdapter) -> Payload:
    return Payload(
        f"lora_adapters[{adapter.name}].source",
        f"lora_adapters[{adapter.name}]",
        f"lora-{adapter.name}",
        adapter.source,
        adapter.revision,
        cfg.adapter_path(adapter.name),
        cfg.model_dir,
        ADAPTER_CONFIG,
        f"lora {adapter.name}",
    )


def draft_payload(cfg: HostConfig) -> Payload:
    """The speculative draft model (speculative_decoding.source), beside the model."""
    spec = cfg.speculative
    return Payload(
        "speculative_decoding.source",
        "speculative_decoding",
        f"draft-{cfg.service_name}",
        spec.source if spec else None,
        spec.revision if spec else None,
        cfg.draft_path,
        cfg.model_dir,
        "config.json",
        "draft",
    )


def adapter_payload_of(name: str) -> Callable[[HostConfig], Payload]:
    """What sync.run asks each host for: the payload of its adapter called `name` (the hosts
    of one model declare the same adapters, vfleet/config/lora.py)."""

    def payload_of(cfg: HostConfig) -> Payload:
        for adapter in cfg.lora_adapters:
            if adapter.name == name:
                return adapter_payload(cfg, adapter)
        raise VfleetError(f"host '{cfg.name}' declares no lora adapter {name!r}")

    return payload_of


@functools.lru_cache(maxsize=64)
def hub_export(spec: str, revision: str | None, what: str = "model_source") -> hub.Export:
    """A hub source resolved once per run (preflight asks for it per host, deploy once more)."""
    return hub.resolve(hub.parse(spec, revision, what))


def adapter_config(cfg: HostConfig, adapter: LoraAdapter) -> tuple[Path, Mapping[str, Any]]:
    """The controller's copy of an adapter and its adapter_config.json, read bounded: what the
    unit (its rank) and preflight (rank, base model, shapes) read. VfleetError without the file,
    JsonFileError for a damaged one."""
    folder = adapter_payload(cfg, adapter).controller_folder()
    if folder is None or not (folder / ADAPTER_CONFIG).is_file():
        raise VfleetError(
            f"{adapter.source}: no {ADAPTER_CONFIG} there; point source at a LoRA adapter folder "
            f"(the one peft's save_pretrained wrote)"
        )
    return folder, mapping(read_json(folder / ADAPTER_CONFIG, MIB), ADAPTER_CONFIG)


def adapter_rank(cfg: HostConfig, adapter: LoraAdapter) -> int:
    """The adapter's LoRA rank, `r` of its adapter_config.json (peft's name for it), read from
    the controller's copy: what --max-lora-rank must cover."""
    where = f"lora_adapters[{adapter.name}]: {adapter.source}"
    try:
        rank = adapter_config(cfg, adapter)[1].get("r")
    except JsonFileError as e:
        raise VfleetError(f"{where}: {e}; re-save the adapter with peft") from None
    except VfleetError as e:
        raise VfleetError(f"lora_adapters[{adapter.name}]: {e}") from None
    if not isinstance(rank, int) or isinstance(rank, bool) or not 1 <= rank <= 4096:
        raise VfleetError(
            f"{where}: {ADAPTER_CONFIG} has no rank 'r' between 1 and 4096 (found {rank!r}); "
            f"re-save the adapter with peft"
        )
    return rank
