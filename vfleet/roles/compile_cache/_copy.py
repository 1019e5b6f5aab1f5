"""Moving a packed compile cache (_files.py's export folder) from its source host into another
host's staging folder: host to host over SSH when the hosts trust each other for weights
(weights_fanout: the same rsync pull as the weights' fan-out), else through the controller
(fetched once per source, then pushed to each host like the weights' first copy)."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile

from vfleet.engine.runner import HostContext, HostFailed
from vfleet.engine.transfer import TransferStats, remote_operand, rsync_push
from vfleet.roles.weights import pull_command

__all__ = ["fetch_args", "Relay"]


def fetch_args(ctx: HostContext, remote_dir: str, local_dir: str) -> list[str]:
    """rsync pulling a host's folder to the controller, with the ssh of the host's connection;
    operands after `--`, the user and address proven not to read as options (transfer.py)."""
    if not remote_dir.startswith("/"):
        raise HostFailed(f"compile cache: {remote_dir!r} is not an absolute path")
    reach, src = remote_operand(ctx, remote_dir)
    dest = os.path.abspath(local_dir).rstrip("/") + "/"
    return ["rsync", "-a", "--partial", "--delete", "--stats"] + reach + ["--", src, dest]


class Relay:
    """One run's copies: each source's export fetched to the controller at most once."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="vfleet-compile-")
        self._fetched: dict[tuple[str, str], str] = {}

    def close(self) -> None:
        self._tmp.cleanup()

    def copy(self, dst: HostContext, src: HostContext, export: str, staging: str) -> int:
        """Fill dst's staging folder with src's export; the bytes that moved."""
        if dst.config.weights_fanout:
            r = dst.run(
                pull_command(dst.config, staging, src.host.user, src.host.address, src.host.port, export), timeout=3600
            )
            if not r.ok:
                raise HostFailed(f"rsync from {src.name} failed: {r.tail()}")
            return TransferStats.parse(r.stdout).bytes_received
        local = self._fetch(src, export)
        dst.must(f"mkdir -p -- {shlex.quote(staging)}", what="compile cache staging folder")
        return rsync_push(dst, local, staging, delete=True).bytes_sent

    def _fetch(self, src: HostContext, export: str) -> str:
        key = (src.name, export)
        if key not in self._fetched:
            local = os.path.join(self._tmp.name, f"{len(self._fetched)}")
            os.makedirs(local)
            r = subprocess.run(fetch_args(src, export, local), capture_output=True, text=True, timeout=3600)
            if r.returncode != 0:
                raise HostFailed(
                    f"rsync of the compile cache from {src.name} failed (exit {r.returncode}): "
                    f"{' | '.join(r.stderr.strip().splitlines()[-3:])}"
                )
            self._fetched[key] = local
        return self._fetched[key]
