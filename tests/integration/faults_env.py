"""Helpers of the fault tests (tests/integration/test_faults*.py): commands on one lab host
read from the JSON report, requests through the gateway, the argument lists of a run's
process tree, a listener that plays a wedged sshd, a model that takes a while to copy."""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import time
from pathlib import Path

import httpx

from tests.integration.deploy_env import API_KEY, vfleet

GATEWAY = "http://10.213.0.13"


def on_host(inv: Path, host: str, command: str) -> str:
    """stdout of `command` on one host (read from the JSON report, not the terminal)."""
    with tempfile.TemporaryDirectory() as tmp:
        rep = Path(tmp) / "run.json"
        p = vfleet(
            "run", "--inventory", str(inv), "--limit", host, "--command", command, "--report", str(rep), timeout=120
        )
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        return json.loads(rep.read_text())["hosts"][host]["steps"][-1]["data"]["stdout"].strip()


def chat_through_gateway(n: int) -> list[int]:
    """n plain chat requests back to back through the gateway: their status codes."""
    codes = []
    with httpx.Client(timeout=120) as client:
        for _ in range(n):
            r = client.post(
                f"{GATEWAY}/v1/chat/completions",
                headers={"Authorization": f"Bearer {API_KEY}"},
                json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
            )
            codes.append(r.status_code)
    return codes


def descendants_argv(root: int) -> list[str]:
    """Command lines of `root` and every process below it (read from /proc, racing exits)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        grew, tree = bool(more), tree | more
    out = []
    for pid in tree:
        try:
            out.append(
                (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except OSError:
            pass
    return out


def run_watching_argv(*args: str, report: Path, timeout: float = 1200) -> tuple[int, dict, str, set[str]]:
    """A vfleet run whose own and its children's (ssh, rsync) argument lists are sampled."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "vfleet.cli", *args, "--report", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: set[str] = set()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.update(descendants_argv(proc.pid))
            time.sleep(0.2)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        stop.set()
        t.join()
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, json.loads(report.read_text()) if report.exists() else {}, out, seen


def step_messages(report: dict, host: str) -> str:
    return "\n".join(f"{s['action']} {s['status']} {s.get('message', '')}" for s in report["hosts"][host]["steps"])


class MuteSSHD:
    """A TCP listener that accepts and never writes a byte (an sshd wedged before its banner)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.5)
        while not self.stopped.is_set():
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                continue

    def close(self) -> None:
        self.stopped.set()
        for c in self.conns:
            c.close()
        self.sock.close()


def big_model(tmp_path: Path) -> Path:
    """The fleet's tiny model plus a 40 MiB shard: a copy that takes a while, a new manifest."""
    import shutil

    from tests.integration.deploy_env import ensure_model

    src = tmp_path / "tiny-big"
    shutil.copytree(ensure_model(), src)
    (src / "MANIFEST.sha256").unlink()
    (src / "extra-shard.bin").write_bytes(bytes(range(256)) * (40 * 4096))
    # a version of its own: test_deploy copies the same shard, and a version already on a host
    # is switched to, not copied (no lock held for long, nothing to kill, no disk needed)
    (src / "test-salt.txt").write_text(f"{tmp_path}\n")
    return src


def staged_bytes(inv: Path, host: str) -> int:
    p = vfleet(
        "run",
        "--inventory",
        str(inv),
        "--limit",
        host,
        "--command",
        "du -sb /srv/models/.staging 2>/dev/null | cut -f1",
        timeout=30,
    )
    words = [ln.split()[1] for ln in p.stdout.splitlines() if ln.startswith(f"[{host}] ") and len(ln.split()) > 1]
    return int(words[0]) if words and words[0].isdigit() else 0


def wait_serving(inv: Path, host: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        p = vfleet("smoke", "--inventory", str(inv), "--limit", host, timeout=180)
        if p.returncode == 0:
            return
        assert time.monotonic() < deadline, p.stdout[-2000:]
        time.sleep(5)


def lock_on(inv: Path, host: str) -> str:
    return on_host(inv, host, "cat /run/vfleet/fleet.lock 2>/dev/null || true")
