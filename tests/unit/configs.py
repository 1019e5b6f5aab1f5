"""HostConfig objects for tests, built the way a deploy builds them: through the inventory
loader and the schema (validated, defaults merged), from a few variables."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml

from vfleet.config.hostconfig import HostConfig
from vfleet.config.variables import SCHEMA
from vfleet.engine.inventory import load_inventory

LAB_VARS: dict[str, Any] = {"vllm_version": "0.32.0", "model_name": "tiny", "model_source": "/srv/src/tiny"}


def host_config(
    vars: dict[str, Any] | None = None,
    *,
    name: str = "gpu01",
    group: str = "vllm",
    address: str | None = None,
    base: dict[str, Any] = LAB_VARS,
) -> HostConfig:
    """The HostConfig of one host in `group` with `base` (LAB_VARS) overlaid by `vars`."""
    hv: dict[str, Any] = {**base, **(vars or {})}
    if address:
        hv["ansible_host"] = address
    data = {"all": {"children": {group: {"hosts": {name: hv}}}}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "inventory.yaml"
        path.write_text(yaml.safe_dump(data))
        inv = load_inventory(path, schema=SCHEMA)
    return HostConfig.from_host(inv.hosts[name])
