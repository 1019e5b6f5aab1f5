"""Host checks on how the tensor-parallel GPUs talk to each other: the links between them
(`nvidia-smi topo -m`, the `topology` fact), NCCL variables already on the host that contradict
or quietly change the topology decision, and PCIe ACS, which breaks peer-to-peer over PCIe.
Their own module because they read the same topology decision (_nccl.py); the NCCL variables
from files vfleet does not write are _nccl_conf.py's."""

from __future__ import annotations

from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig

from ._check_base import PASS, WARN, Check

DEBUG_NCCL_VARS = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}

# --- topology and NCCL ------------------------------------------------------------------------


def check_topology(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    t = facts.get("topology") or {}
    env = t.get("nccl_env") or {}
    env_s = " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "NCCL defaults"
    gpus = t.get("tp_gpus") or []
    if len(gpus) < 2:
        return Check("topology.tp_links", PASS, f"single GPU: no inter-GPU traffic ({env_s})")
    if t.get("matrix") is None:
        return Check(
            "topology.tp_links",
            WARN,
            f"GPU topology unknown (`nvidia-smi topo -m` failed): NCCL environment not decided ({env_s})",
            "check `nvidia-smi topo -m` on the host",
        )
    links = sorted(set((t.get("tp_links") or {}).values()))
    where = f"TP GPUs {','.join(map(str, gpus))} linked by {'/'.join(links)}"
    if t.get("any_nvlink_between_tp"):
        return Check("topology.tp_links", PASS, f"{where}: NVLink, P2P stays on ({env_s})")
    if t.get("worst_tp_link") == "SYS":
        return Check(
            "topology.tp_links",
            WARN,
            f"{where}: PCIe across CPU sockets, no NVLink; the unit gets "
            f"{env_s}; every all-reduce crosses the socket interconnect",
            "keep the TP group inside one NUMA node (see topology.numa_affinity) or accept the slower path",
        )
    return Check("topology.tp_links", PASS, f"{where}: {t.get('nccl_reason')} ({env_s})")


def check_nccl_env(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    """NCCL variables already on the host (service env file, /etc/nccl.conf) that contradict the
    topology decision, are not declared in the inventory, or are not NCCL variables at all."""
    t = facts.get("topology") or {}
    wanted = t.get("nccl_env") or {}
    operator = t.get("nccl_operator_env") or {}
    p2p_keys = set(vllm_facts.nccl_table()["p2p_off_env"])
    known = set(vllm_facts.nccl_table()["known_vars"])
    env_path = (facts.get("paths") or {}).get("env_file", "the service env file")
    sources = [("/etc/nccl.conf", facts.get("nccl_conf") or {}), (env_path, facts.get("nccl_env_file") or {})]
    problems: list[str] = []
    fixes: list[str] = []
    for path, found in sources:
        for k, v in sorted(found.items()):
            if k in p2p_keys or k in wanted:
                want = wanted.get(k, "0")
                if str(v) != str(want) and not (want == "0" and str(v) in ("", "0")):
                    problems.append(
                        f"{k}={v} in {path} contradicts the topology decision ({k}={want}: {t.get('nccl_reason')})"
                    )
                    fixes.append(f"remove {k} from {path}")
            elif k not in known:
                problems.append(f"{k}={v} in {path} is not an NCCL variable (typo?)")
                fixes.append(f"remove or correct {k} in {path}")
            elif k not in operator and k not in DEBUG_NCCL_VARS:
                problems.append(f"stray {k}={v} in {path} silently changes NCCL behaviour")
                fixes.append(f"remove {k} from {path}, or declare it in the inventory's nccl_env")
    if problems:
        return Check("nccl.env", WARN, "; ".join(problems), "; ".join(dict.fromkeys(fixes)))
    env_s = " ".join(f"{k}={v}" for k, v in sorted(wanted.items())) or "NCCL defaults"
    return Check("nccl.env", PASS, f"no stray NCCL variables; the unit gets {env_s}")


def check_pcie_acs(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """Only relevant when the TP GPUs talk P2P over PCIe (no NVLink, P2P left on)."""
    t = facts.get("topology") or {}
    acs = facts.get("pcie_acs")
    p2p_over_pcie = (
        len(t.get("tp_gpus") or []) > 1
        and t.get("matrix") is not None
        and not t.get("any_nvlink_between_tp")
        and (t.get("nccl_env") or {}).get("NCCL_P2P_DISABLE") != "1"
    )
    if not p2p_over_pcie or acs is None:
        return None
    if acs["src_valid"]:
        return Check(
            "pcie.acs",
            WARN,
            f"ACS Source Validation is on for {acs['src_valid']} PCIe port(s) "
            "(lspci ACSCtl: SrcValid+): GPU peer-to-peer over PCIe is redirected through the root "
            "complex, which hangs or slows NCCL",
            "disable ACS in the BIOS (or `setpci` on the bridges), or set nccl_env: {NCCL_P2P_DISABLE: '1'}",
        )
    return Check("pcie.acs", PASS, f"ACS Source Validation off on all {acs['bridges']} ACS-capable port(s)")
