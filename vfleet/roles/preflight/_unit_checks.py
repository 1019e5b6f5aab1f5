"""The `service.unit` check: the units vfleet would write must not shadow the host's own
(vfleet/roles/service/_unit_files.py says why and how they are found). Deploy and service
refuse such a host before changing it whatever preflight said; this check says it earlier,
in the audit and its report."""

from __future__ import annotations

from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.roles.service import owned_units, refusal

from ._check_base import FAIL, PASS, Check


def check_unit_files(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """FAIL when a unit vfleet would write is one the host already has and vfleet did not
    write; None when the fact is unknown (a snapshot captured before it existed)."""
    found = facts.get("unit_files")
    if found is None:
        return None
    why = refusal(cfg, found)
    if why:
        return Check(
            "service.unit",
            FAIL,
            why,
            f"set service_name to a name no unit of the host has (e.g. vllm-{cfg.service_name})",
        )
    units = ", ".join(owned_units(cfg))
    return Check("service.unit", PASS, f"{units}: no unit of the host's own by that name")
