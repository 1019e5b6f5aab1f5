"""Model sources shared by the roles: manifests, hf:// snapshots, adapter and draft payloads."""

from __future__ import annotations

from . import _hub as hub
from ._hub import never_download
from ._manifest import MANIFEST_NAME, manifest_id, model_files, verify_command, write_manifest
from ._payload import (
    Payload,
    adapter_config,
    adapter_payload_of,
    adapter_rank,
    draft_payload,
    hub_export,
    model_payload,
)

__all__ = [
    "adapter_config",
    "adapter_payload_of",
    "adapter_rank",
    "draft_payload",
    "hub",
    "hub_export",
    "manifest_id",
    "MANIFEST_NAME",
    "model_files",
    "model_payload",
    "never_download",
    "Payload",
    "verify_command",
    "write_manifest",
]
