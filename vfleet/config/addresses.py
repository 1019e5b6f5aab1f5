"""Address-like variables, checked before anything connects: the address a host is reached at
(ansible_host / ssh_host, or its name), the address vLLM binds to (vllm_host) and the one
nginx listens on (gateway_listen_address).

Why here and not at use: an address travels far. The controller dials it (SSH, the smoke
checks), nginx writes it into `server` and `listen` lines, Prometheus into its targets, and a
multi-host replica's members reach their head at it (Ray's --address and RAY_ADDRESS, vLLM's
--master-addr, the all-reduce rendezvous). Each of those joins address and port its own way,
so the address itself must be one thing they all read the same:

- an IPv6 literal is written bare (`fd00::1`), never in brackets: vfleet adds the brackets
  where an address meets a port (hostconfig.hostport, RFC 3986 section 3.2.2), and the
  programs that take the bare address (vLLM's --master-addr, Ray's --node-ip-address, SSH)
  would read `[fd00::1]` as a host name;
- no IPv6 zone (`fe80::1%eth0`): a URL needs it escaped (RFC 6874), nginx and Ray do not take it;
- something made of digits and dots is a well-formed IPv4 address: `10.0.0.256` and `010.0.0.1`
  are refused (inet_aton would read the leading zero as octal);
- anything else is a host name (RFC 1123 labels; `_` tolerated as /etc/hosts and ssh_config
  aliases use it), so never an option (`-oProxyCommand=...`), a space or a control character.
"""

from __future__ import annotations

import ipaddress
import re

__all__ = ["address_problem", "ip_problem", "machine_key"]

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?")
_DOTTED = re.compile(r"[0-9.]+")


def address_problem(value: str) -> str | None:
    """Why `value` is not an address every consumer reads alike; None when it is."""
    if value.startswith("[") or value.endswith("]"):
        return "write an IPv6 address without brackets (vfleet adds them where the address meets a port)"
    if ":" in value:
        try:
            ip = ipaddress.IPv6Address(value)
        except ValueError:
            return "not a well-formed IPv6 address"
        if ip.scope_id:
            return (
                "an IPv6 zone (%...) cannot be written in a URL, an nginx line or Ray's address; "
                "use a global or unique-local address"
            )
        return None
    if _DOTTED.fullmatch(value):
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            return "not a well-formed IPv4 address (four numbers 0-255, no leading zeros)"
        return None
    if not _HOSTNAME.fullmatch(value):
        return "neither an IP address nor a host name"
    return None


def ip_problem(value: str) -> str | None:
    """Why `value` is not a bare IP address (nginx's `listen` takes no name); None when it is."""
    problem = address_problem(value)
    if problem is None and ":" not in value and not _DOTTED.fullmatch(value):
        return "not an IP address (nginx listens on an address, not a name)"
    return problem


def machine_key(address: str) -> str:
    """One key for the addresses that reach the same listener: an IP in its canonical form, a
    name in lower case, every loopback spelling as one (`localhost`, 127.0.0.1, ::1)."""
    bare = address.strip("[]").lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return "loopback" if bare == "localhost" else bare
    return "loopback" if ip.is_loopback else str(ip)
