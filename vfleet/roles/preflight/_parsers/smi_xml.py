"""`nvidia-smi -q -x` (XML) and `nvidia-smi -q` (text): optional, richer GPU facts.

The XML schema drifts below the top level across drivers, and shared captures are often abridged
(not well-formed), so after trying a real XML parser we fall back to pulling the few elements we
need with regular expressions, one `<gpu>` block at a time.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

_UNKNOWN = {"N/A", "[N/A]", "Not Supported", "[Not Supported]", ""}


def _val(v: str | None) -> str | None:
    if v is None:
        return None
    v = v.strip()
    return None if v in _UNKNOWN else v


def _mib(v: str | None) -> int | None:
    m = re.match(r"\s*(\d+)\s*MiB", v or "")
    return int(m.group(1)) if m else None


def _int(v: str | None) -> int | None:
    v = _val(v)
    return int(v) if v and v.isdigit() else None


def _tag(block: str, path: str) -> str | None:
    """Text of the first element matching a 'parent/child' path (regex, tolerant of breakage)."""
    text = block
    for part in path.split("/"):
        m = re.search(rf"<{part}(?:\s[^>]*)?>(.*?)(?:</{part}>|$)", text, re.S)
        if not m:
            return None
        text = m.group(1)
    return text if "<" not in text else None


def parse(output: str) -> dict[str, Any]:
    """{driver_version, cuda_version, attached_gpus, gpus: [{bus_id, name, uuid, persistence_mode,
    memory_total_mib, ecc_uncorrected}], well_formed}."""
    try:
        root = ET.fromstring(output)
        well_formed = True
    except ET.ParseError:
        root, well_formed = None, False
    text = output or ""
    result: dict[str, Any] = {
        "driver_version": _val(_tag(text, "driver_version")),
        "cuda_version": _val(_tag(text, "cuda_version")),
        "attached_gpus": _int(_tag(text, "attached_gpus")),
        "gpus": [],
        "well_formed": well_formed,
    }
    if root is not None:
        for g in root.findall("gpu"):
            ecc = g.find("ecc_errors/volatile/dram_uncorrectable")
            if ecc is None:
                ecc = g.find("ecc_errors/volatile/total/uncorrectable")  # older schema
            pm = _val(g.findtext("persistence_mode"))
            result["gpus"].append(
                {
                    "bus_id": g.get("id"),
                    "name": _val(g.findtext("product_name")),
                    "uuid": _val(g.findtext("uuid")),
                    "persistence_mode": None if pm is None else pm == "Enabled",
                    "memory_total_mib": _mib(g.findtext("fb_memory_usage/total")),
                    "ecc_uncorrected": _int(ecc.text if ecc is not None else None),
                }
            )
        return result
    blocks = re.split(r"(?=<gpu id=)", text)[1:]
    for b in blocks:
        idm = re.match(r'<gpu id="([^"]+)"', b)
        pm = _val(_tag(b, "persistence_mode"))
        result["gpus"].append(
            {
                "bus_id": idm.group(1) if idm else None,
                "name": _val(_tag(b, "product_name")),
                "uuid": _val(_tag(b, "uuid")),
                "persistence_mode": None if pm is None else pm == "Enabled",
                "memory_total_mib": _mib(_tag(b, "fb_memory_usage/total")),
                "ecc_uncorrected": _int(_tag(b, "ecc_errors/volatile/dram_uncorrectable")),
            }
        )
    return result


def parse_text(output: str) -> dict[str, Any]:
    """`nvidia-smi -q` text: 'Key : value' lines, GPUs introduced by 'GPU <bus id>' lines."""
    result: dict[str, Any] = {"driver_version": None, "cuda_version": None, "attached_gpus": None, "gpus": []}
    gpu: dict[str, Any] | None = None
    for ln in (output or "").splitlines():
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$", ln)
        if m:
            gpu = {"bus_id": m.group(1), "name": None, "uuid": None, "persistence_mode": None}
            result["gpus"].append(gpu)
            continue
        kv = re.match(r"^(\s*)([^:]+?)\s*:\s*(.*)$", ln)
        if not kv:
            continue
        indent, key, value = len(kv.group(1)), kv.group(2), _val(kv.group(3))
        if gpu is None and indent == 0:
            if key == "Driver Version":
                result["driver_version"] = value
            elif key == "CUDA Version":
                result["cuda_version"] = value
            elif key == "Attached GPUs":
                result["attached_gpus"] = _int(value)
        elif gpu is not None and indent == 4:
            if key == "Product Name":
                gpu["name"] = value
            elif key == "GPU UUID":
                gpu["uuid"] = value
            elif key == "Persistence Mode":
                gpu["persistence_mode"] = None if value is None else value == "Enabled"
    return result
