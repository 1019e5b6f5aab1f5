"""systemd-nspawn lifecycle of one lab host: start detached, find, stop, wait for ready.

WHY detached (setsid, log file): `invoke lab.up` returns while hosts keep running; the
PID is recorded so `down` can stop them from a new process, and /proc is scanned for
leftovers after a crash (the command line names the lab's namespace path)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from vfleet.lab import cgroups
from vfleet.lab.network import netns_name
from vfleet.lab.state import NETNS_PREFIX
from vfleet.lab.system import cmdline, pid_alive

# Children started by this process: waited on (reaped) by `stop` so no zombie stays.
_CHILDREN: dict[int, subprocess.Popen] = {}


def nspawn_cmd(name: str, root: Path, machine_id: str, affinity: str = "") -> list[str]:
    """`affinity` (a cpulist) only where no cpuset holds the host: a cpuset group already
    sets it, and a CPU affinity asked for at start would outlive a later change of the set."""
    return [
        "systemd-nspawn",
        "-D",
        str(root),
        "--register=no",
        "--keep-unit",
        "-M",
        name,
        f"--uuid={machine_id}",
        "-b",
        "--console=pipe",
        f"--network-namespace-path=/run/netns/{netns_name(name)}",
        *([f"--cpu-affinity={affinity}"] if affinity else []),
    ]


def start(name: str, root: Path, machine_id: str, log: Path, cpus: str) -> int:
    """Boot the host in the background on `cpus` (a cpulist); returns systemd-nspawn's PID."""
    groups = cgroups.prepare(name, cpus)
    affinity = "" if cgroups.cpuset_root() else cpus
    # A shell joins the host's cgroups, then execs nspawn (same PID): no preexec_fn, which
    # is unsafe in a threaded caller such as pytest.
    join = (
        'for g in "$@"; do [ "$g" = -- ] && break; echo $$ > "$g/cgroup.procs" || exit 97; '
        'shift; done; shift; exec "$@"'
    )
    cmd = ["sh", "-c", join, "sh", *map(str, groups), "--", *nspawn_cmd(name, root, machine_id, affinity)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    _CHILDREN[proc.pid] = proc
    return proc.pid


def is_lab_nspawn(pid: int, name: str | None = None) -> bool:
    """Whether `pid` is a systemd-nspawn of the lab (of host `name` if given)."""
    args = cmdline(pid)
    if not args or not os.path.basename(args[0]).startswith("systemd-nspawn"):
        return False
    want = f"--network-namespace-path=/run/netns/{NETNS_PREFIX}"
    want += f"{name}" if name else ""
    return any(a == want if name else a.startswith(want) for a in args)


def running_pid(name: str, recorded: int) -> int:
    """PID of host `name`'s nspawn: the recorded one if still that process, else a scan."""
    if recorded and pid_alive(recorded) and is_lab_nspawn(recorded, name):
        return recorded
    for pid in lab_nspawn_pids():
        if is_lab_nspawn(pid, name):
            return pid
    return 0


def lab_nspawn_pids() -> list[int]:
    """Every live systemd-nspawn whose namespace path is a lab one."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and is_lab_nspawn(int(entry.name)) and pid_alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


def reap_exited() -> None:
    """Collect every exited child this process started (no zombie outlives `down`)."""
    for pid in list(_CHILDREN):
        _reap(pid)


def _reap(pid: int) -> None:
    proc = _CHILDREN.get(pid)
    if proc is not None and proc.poll() is not None:
        _CHILDREN.pop(pid, None)


def signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait until all `pids` exited; returns those still alive at the deadline."""
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left and time.monotonic() < deadline:
        for pid in left:
            _reap(pid)
        left = [p for p in left if pid_alive(p)]
        if left:
            time.sleep(0.2)
    for pid in pids:
        _reap(pid)
    return left


def stop(pids: list[int], timeout: float = 30) -> list[int]:
    """SIGTERM (nspawn shuts the host down in order), SIGKILL after `timeout`.
    Returns PIDs that survived even SIGKILL (should be none)."""
    signal_pids(pids, signal.SIGTERM)
    left = wait_gone(pids, timeout)
    if left:
        signal_pids(left, signal.SIGKILL)
        left = wait_gone(left, 10)
    return left


@dataclass
class Readiness:
    name: str
    state: str  # running | degraded | starting | unreachable | ...
    seconds: float
    failed_units: list[str]
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.state in ("running", "degraded")


def ssh_cmd(key: Path, known_hosts: Path, ip: str, command: str, timeout: int = 5) -> list[str]:
    """ssh with the lab key and the lab's known_hosts, strict host key checking, no user
    config (the machine's ~/.ssh/config must not change what the lab tests)."""
    return [
        "ssh",
        "-F",
        "/dev/null",
        "-i",
        str(key),
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"ConnectTimeout={timeout}",
        "-o",
        "LogLevel=ERROR",
        f"root@{ip}",
        command,
    ]


def wait_ready(name: str, ip: str, key: Path, known_hosts: Path, timeout: float = 180, pid: int = 0) -> Readiness:
    """Poll until `systemctl is-system-running --wait` says running/degraded over SSH."""
    t0 = time.monotonic()
    detail = ""
    while time.monotonic() - t0 < timeout:
        if pid and not pid_alive(pid):
            return Readiness(name, "exited", time.monotonic() - t0, [], "systemd-nspawn exited; see its console.log")
        left = max(5, int(timeout - (time.monotonic() - t0)))
        cmd = ssh_cmd(key, known_hosts, ip, f"timeout {left} systemctl is-system-running --wait", timeout=3)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=left + 10)
        except subprocess.TimeoutExpired:
            detail = "ssh timed out"
            continue
        state = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if state in ("running", "degraded"):
            failed: list[str] = []
            if state == "degraded":
                # A unit that failed and was restarted leaves no `--failed` line: then show
                # the boot's error log instead, so "degraded" always comes with a reason.
                out = subprocess.run(
                    ssh_cmd(
                        key,
                        known_hosts,
                        ip,
                        "systemctl --failed --no-legend --plain; "
                        "echo ---; systemctl is-system-running; "
                        "journalctl -b -p err -q --no-pager | tail -n 5",
                    ),
                    capture_output=True,
                    text=True,
                    timeout=30,
                ).stdout
                units, _, rest = out.partition("---\n")
                failed = [ln.strip() for ln in units.splitlines() if ln.strip()]
                now, _, journal = rest.partition("\n")
                if not failed and now.strip() == "running":
                    return Readiness(
                        name, "running", time.monotonic() - t0, [], "degraded for a moment: " + journal.strip()[-300:]
                    )
                if not failed:
                    failed = [ln.strip() for ln in journal.splitlines() if ln.strip()]
            return Readiness(name, state, time.monotonic() - t0, failed)
        detail = (proc.stderr.strip() or state or f"ssh exit {proc.returncode}")[-200:]
        time.sleep(0.5)
    return Readiness(name, "timeout", time.monotonic() - t0, [], detail)
