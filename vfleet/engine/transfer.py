"""Tree transfers with rsync (Fabric's put cannot send folders): resumable (--partial), only
changed bytes move, and the ssh it runs uses the same key, port and known_hosts as the
host's Connection, so host key checking stays on for transfers too.

No value reads as an option: the source is made absolute and both operands follow `--`
(a model folder named `--rsh=...` is a folder), and the user and address that rsync hands
to ssh, which takes no `--` before its host, are proven not to start with '-'."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
from dataclasses import dataclass
from typing import Callable

from vfleet.engine.owned_paths import plain_operand
from vfleet.engine.runner import HostContext, HostFailed

_PROGRESS = re.compile(rb"^\s*([\d,]+)\s+(\d+)%")
_SENT = re.compile(r"Total bytes sent:\s*([\d,]+)")
_RECEIVED = re.compile(r"Total bytes received:\s*([\d,]+)")
_LITERAL = re.compile(r"Literal data:\s*([\d,]+)")


@dataclass
class TransferStats:
    bytes_sent: int = 0
    bytes_received: int = 0
    literal_bytes: int = 0

    @classmethod
    def parse(cls, text: str) -> "TransferStats":
        def num(rx: re.Pattern[str]) -> int:
            m = rx.search(text)
            return int(m.group(1).replace(",", "")) if m else 0

        return cls(num(_SENT), num(_RECEIVED), num(_LITERAL))


def ssh_command(ctx: HostContext) -> list[str]:
    """The ssh command line (for rsync -e) matching the host's connection settings."""
    s = ctx.settings()
    cmd = [
        "ssh",
        "-p",
        str(s.port),
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={int(s.connect_timeout)}",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
    ]  # a host that vanishes ends the copy
    if s.key_file:
        cmd += ["-i", os.path.expanduser(s.key_file), "-o", "IdentitiesOnly=yes"]
    if s.host_key_checking:
        cmd += ["-o", "StrictHostKeyChecking=yes"]
        if s.known_hosts_file:
            cmd += ["-o", f"UserKnownHostsFile={os.path.expanduser(s.known_hosts_file)}"]
    else:
        cmd += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    return cmd


def rsync_args(
    ctx: HostContext, src_dir: str, dest_dir: str, *, delete: bool = True, extra: list[str] | None = None
) -> list[str]:
    """The rsync command line of a push (module doc: why no value can read as an option)."""
    if not dest_dir.startswith("/"):
        raise HostFailed(f"rsync destination {dest_dir!r} is not an absolute path")
    args = ["rsync", "-a", "--partial", "--stats", "--info=progress2", "--no-inc-recursive"]
    if delete:
        args.append("--delete")
    args += extra or []
    src = os.path.abspath(os.path.expanduser(src_dir)).rstrip("/") + "/"
    reach, dest = remote_operand(ctx, dest_dir)
    return args + reach + ["--", src, dest]


def remote_operand(ctx: HostContext, path: str) -> tuple[list[str], str]:
    """rsync's options to reach the host over its own ssh (sudo rsync there when it becomes
    root), and `path` on it as an operand, `user@address:path/` ([address] for IPv6); on a
    local connection no option and the path itself. The user and address are proven not to
    read as options (module doc)."""
    if ctx.host.connection == "local":
        return [], path.rstrip("/") + "/"
    s = ctx.settings()
    reach = ["-e", shlex.join(ssh_command(ctx))]
    if s.become:
        reach += ["--rsync-path", "sudo -n rsync"]
    user = f"{plain_operand(s.user, 'ansible_user')}@" if s.user else ""
    plain_operand(s.address, "ansible_host")
    address = f"[{s.address}]" if ":" in s.address else s.address
    return reach, f"{user}{address}:{path.rstrip('/')}/"


def rsync_push(
    ctx: HostContext,
    src_dir: str,
    dest_dir: str,
    *,
    delete: bool = True,
    extra: list[str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> TransferStats:
    """Copy the contents of a controller folder into a folder on the host. Returns rsync's
    own byte counts (what the controller really sent), for fan-out accounting."""
    args = rsync_args(ctx, src_dir, dest_dir, delete=delete, extra=extra)
    dest = args[-1]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err_chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read() if proc.stderr else b""), daemon=True)
    reader.start()
    out = bytearray()
    buf = b""
    assert proc.stdout is not None
    while True:
        chunk = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(65536)
        if not chunk:
            break
        out += chunk
        buf += chunk
        *parts, buf = re.split(rb"[\r\n]", buf)
        for part in parts:
            m = _PROGRESS.match(part)
            if m and on_progress:
                on_progress(int(m.group(1).replace(b",", b"")), int(m.group(2)))
    rc = proc.wait()
    reader.join(timeout=5)
    text = out.decode(errors="replace")
    if rc != 0:
        err = b"".join(err_chunks).decode(errors="replace").strip().splitlines()
        raise HostFailed(
            f"rsync to {dest} failed (exit {rc}): {' | '.join(err[-3:])}; a re-run resumes from what was copied"
        )
    return TransferStats.parse(text)
