"""The lab's network: one bridge in the root namespace, one namespace + veth per host.

WHY a bridge and not veth pairs alone: hosts must reach each other (the gateway forwards to
vLLM hosts, weights fan out host to host) and the machine must reach them by IP; a bridge
gives one L2 segment for all with no IP forwarding. No default route is set inside a host's
namespace, so lab hosts reach nothing but the lab subnet."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from vfleet.engine.errors import VfleetError
from vfleet.lab.state import BRIDGE, BRIDGE_IP, NETNS_PREFIX, SUBNET_PREFIX, VETH_PREFIX
from vfleet.lab.system import is_mountpoint, run

FW_COMMENT = "vfleet-lab"
# iptables rules that let bridge traffic through when br_netfilter hands bridged packets to
# a FORWARD chain with a DROP policy (Docker does that); only added where iptables exists.
FW_RULES = [
    ["FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT"],
    ["INPUT", "-i", BRIDGE, "-j", "ACCEPT"],
]


def netns_name(host: str) -> str:
    return NETNS_PREFIX + host


def veth_name(host: str) -> str:
    return VETH_PREFIX + host


def links() -> dict[str, dict]:
    """Interfaces of the root namespace by name."""
    return {link["ifname"]: link for link in json.loads(run(["ip", "-j", "link", "show"]) or "[]")}


def netns_list() -> list[str]:
    """Names of all named network namespaces (`ip netns list`)."""
    out = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def lab_netns() -> list[str]:
    return [n for n in netns_list() if n.startswith(NETNS_PREFIX)]


def lab_veths() -> list[str]:
    return [n for n in links() if n.startswith(VETH_PREFIX)]


def ensure_bridge() -> None:
    """Create the lab bridge with the machine's address on the lab subnet (idempotent)."""
    if BRIDGE not in links():
        routes = run(["ip", "-j", "route", "show", f"{SUBNET_PREFIX}.0/24"])
        if json.loads(routes or "[]"):
            raise VfleetError(
                f"lab: subnet {SUBNET_PREFIX}.0/24 is already routed on this "
                "machine (not by the lab); fix: free it or run `invoke lab.down`"
            )
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    addrs = json.loads(run(["ip", "-j", "addr", "show", "dev", BRIDGE]) or "[]")
    have = {a["local"] for entry in addrs for a in entry.get("addr_info", [])}
    if BRIDGE_IP not in have:
        run(["ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])
    ensure_firewall()


def ensure_host_net(host: str, ip: str) -> None:
    """Namespace vfl-<host> with eth0=<ip>/24 on the bridge and lo up (idempotent)."""
    ns, veth = netns_name(host), veth_name(host)
    if ns not in netns_list():
        run(["ip", "netns", "add", ns])
    if veth not in links():
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "link", "set", veth, "master", BRIDGE, "up"])
    inner = json.loads(run(["ip", "-n", ns, "-j", "addr", "show", "dev", "eth0"]) or "[]")
    have = {a["local"] for entry in inner for a in entry.get("addr_info", [])}
    if ip not in have:
        run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])


def netns_pids(ns: str) -> list[int]:
    """Processes whose network namespace is `ns`: what a host still runs after its
    systemd-nspawn was killed."""
    out = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def remove_host_net(host: str) -> None:
    """Delete a host's veth, then its namespace. In this order: the kernel drops the veth pair
    of a deleted namespace asynchronously, so a veth listed just after `ip netns delete` can be
    gone by the time `ip link delete` runs (CI failed so once)."""
    ns, veth = netns_name(host), veth_name(host)
    if veth in links():
        run(["ip", "link", "delete", veth])
    if ns in netns_list():
        run(["ip", "netns", "delete", ns])


def remove_all() -> None:
    """Every lab namespace, veth and the bridge, found by name (works without state)."""
    for ns in lab_netns():
        run(["ip", "netns", "delete", ns], check=False)
    for veth in lab_veths():
        run(["ip", "link", "delete", veth], check=False)
    if BRIDGE in links():
        run(["ip", "link", "delete", BRIDGE])
    remove_firewall()
    release_run_netns()


def release_run_netns() -> None:
    """`ip netns add` bind-mounts /run/netns onto itself; undo that when no namespace is left
    so `down` leaves no mount behind."""
    path = Path("/run/netns")
    if path.is_dir() and not any(path.iterdir()) and is_mountpoint(path):
        run(["umount", str(path)], check=False)


def ensure_firewall() -> None:
    if not shutil.which("iptables"):
        return
    for rule in FW_RULES:
        spec = rule[1:] + ["-m", "comment", "--comment", FW_COMMENT]
        if not _iptables_has(rule[0], spec):
            run(["iptables", "-I", rule[0], *spec], check=False)


def _iptables_has(chain: str, spec: list[str]) -> bool:
    return subprocess.run(["iptables", "-C", chain, *spec], capture_output=True).returncode == 0


def remove_firewall() -> None:
    if not shutil.which("iptables"):
        return
    for rule in FW_RULES:
        spec = rule[1:] + ["-m", "comment", "--comment", FW_COMMENT]
        while _iptables_has(rule[0], spec):
            run(["iptables", "-D", rule[0], *spec], check=False)
