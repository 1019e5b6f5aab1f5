"""Post-deploy verification with testinfra: plain pytest over the same inventory, run by
`vfleet verify`. Connects with the inventory's keys and known_hosts (host key checking on)."""

from __future__ import annotations

from ._run import run_verify, ssh_config

__all__ = ["run_verify", "ssh_config"]
