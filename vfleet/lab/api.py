"""`up`, `down`, `status`: the lab's public API (the Invoke tasks are thin wrappers).

from vfleet.lab.api import up, down, status
result = up(3, profiles={"lab1": "v100-8-pcie"})   # -> UpResult(inventory=Path, ...)
status()                                           # -> list[HostStatus]
down()                                             # -> Residue (empty when clean)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from vfleet.engine.errors import VfleetError
from vfleet.lab import cgroups, cpus, guest, hosts, inventory_writer, network, profiles, rootfs
from vfleet.lab.state import BRIDGE, MAX_HOSTS, MAX_NAME, HostRecord, LabState, host_ip
from vfleet.lab.system import is_mountpoint, raise_sysctl, require_root, restore_sysctl, run

Echo = Callable[[str], None]
NAME_RE = re.compile(r"^[a-z][a-z0-9-]*$")


@dataclass
class UpResult:
    inventory: Path
    hosts: list[HostRecord]
    readiness: list[hosts.Readiness]


@dataclass
class HostStatus:
    name: str
    ip: str
    profile: str
    pid: int
    state: str  # running | degraded | starting | stopped | unreachable ...
    cpus: str = ""  # the cpulist the host's cpuset holds it to


@dataclass
class Residue:
    """What the lab left on the machine; all empty after a clean `down`."""

    nspawn_pids: list[int] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    netns_pids: list[int] = field(default_factory=list)
    veths: list[str] = field(default_factory=list)
    bridge: bool = False
    mounts: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.nspawn_pids
            or self.netns
            or self.netns_pids
            or self.veths
            or self.bridge
            or self.mounts
            or self.cgroups
        )


def ensure_lab_key(state: LabState) -> None:
    """The lab's ed25519 key pair, generated once and kept across `down`."""
    state.root.mkdir(parents=True, exist_ok=True)
    if not state.key.is_file():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vfleet-lab", "-f", str(state.key)])


def parse_profiles(spec: str) -> dict[str, str]:
    """`lab1=v100-8-pcie,lab2=a100-8-sxm` -> {"lab1": "v100-8-pcie", ...}."""
    out = {}
    for item in [s.strip() for s in (spec or "").split(",") if s.strip()]:
        name, eq, prof = item.partition("=")
        if not eq or not name or not prof:
            raise VfleetError(
                f"lab: --profiles item {item!r} is not HOST=PROFILE; fix: e.g. "
                "--profiles lab1=v100-8-pcie,lab2=a100-8-sxm"
            )
        out[name.strip()] = prof.strip()
    return out


def _validate(n: int, prefix: str, gateways: int, extra: dict[str, str]) -> None:
    if not 1 <= n <= MAX_HOSTS:
        raise VfleetError(f"lab: --hosts {n} out of range; fix: 1..{MAX_HOSTS}")
    if not NAME_RE.match(prefix) or len(f"{prefix}{n}") > MAX_NAME:
        raise VfleetError(
            f"lab: --prefix {prefix!r} invalid; fix: lowercase letters/digits/-, host names up to {MAX_NAME} chars"
        )
    if not 0 <= gateways <= n:
        raise VfleetError(f"lab: --gateways {gateways} with --hosts {n}; fix: 0..{n}")
    names = {f"{prefix}{i}" for i in range(1, n + 1)}
    unknown = sorted(set(extra) - names)
    if unknown:
        raise VfleetError(
            f"lab: --profiles names {', '.join(unknown)}, not among the hosts "
            f"{prefix}1..{prefix}{n}; fix the host names"
        )


def _known_hosts(state: LabState, recs: list[HostRecord]) -> str:
    lines = []
    for r in recs:
        pub = (state.host_dir(r.name) / "ssh_host_ed25519_key.pub").read_text().split()
        lines.append(f"{r.name},{r.ip} {pub[0]} {pub[1]}")
    return "\n".join(lines) + "\n"


INOTIFY = "fs/inotify/max_user_instances"
INOTIFY_FLOOR = 8192


def _raise_limits(state: LabState) -> None:
    """Raise root's inotify instance limit for the hosts; remember the old value for down."""
    old = raise_sysctl(INOTIFY, INOTIFY_FLOOR)
    if old is not None:
        lab = state.lab()
        lab.setdefault("sysctl", {})[INOTIFY] = {"old": old, "ours": INOTIFY_FLOOR}
        state.save_lab(lab)


def _restore_limits(state: LabState) -> None:
    for name, vals in state.lab().get("sysctl", {}).items():
        restore_sysctl(name, vals["old"], vals["ours"])


def _forget(state: LabState, name: str) -> None:
    """Drop a stopped host entirely: its processes, mounts, network and state."""
    _kill_leftovers(name)
    if rootfs.unmount_tree(state.host_dir(name)):
        raise VfleetError(f"lab: cannot unmount {state.host_dir(name)}; fix: `invoke lab.down`")
    network.remove_host_net(name)
    shutil.rmtree(state.host_dir(name), ignore_errors=True)


def _kill_leftovers(name: str) -> None:
    """SIGKILL what still runs in a host's namespace after its systemd-nspawn died (a
    killed nspawn does not take the host's systemd with it)."""
    ns = network.netns_name(name)
    left = set(cgroups.pids_in(name))
    if ns in network.netns_list():
        left.update(network.netns_pids(ns))
    if left:
        hosts.signal_pids(sorted(left), 9)
        hosts.wait_gone(sorted(left), 10)
    cgroups.remove([d for d in cgroups.leftover_dirs() if name in d.parts])


def _hold(rec: HostRecord, echo: Echo) -> None:
    """Move a running host onto the CPUs its record names (the lab's shape changed, e.g. a
    gateway became a vLLM host); where no cpuset exists, each of its processes' affinity."""
    want = rec.extra["cpus"]
    had = cgroups.bound_cpus(rec.name)
    if had == want:
        return
    if not cgroups.bind(rec.name, want):
        for pid in cgroups.pids_in(rec.name):
            try:
                os.sched_setaffinity(pid, cpus.from_list(want))
            except OSError:
                pass  # exited meanwhile
    echo(f"{rec.name}: cpus {had or '?'} -> {want}")


def up(
    n: int,
    gpu_profile: str | None = None,
    profiles_by_host: dict[str, str] | None = None,
    prefix: str = "lab",
    gateways: int | None = None,
    state_dir: str | None = None,
    timeout: float = 180,
    backing: str = "tmpfs",
    echo: Echo = print,
) -> UpResult:
    """Start hosts <prefix>1..<prefix>N (running ones stay), wait until each is reachable
    over SSH with systemd running/degraded, write the inventory. Profile per host:
    profiles_by_host[name], else gpu_profile, else the host's current one, else h200-1."""
    require_root()
    extra = dict(profiles_by_host or {})
    gateways = (1 if n >= 2 else 0) if gateways is None else gateways
    _validate(n, prefix, gateways, extra)
    for spec in [*extra.values(), *([gpu_profile] if gpu_profile else [])]:
        profiles.resolve(spec)  # a typo fails here, before anything is created
    state = LabState(state_dir)
    ours = re.compile(re.escape(prefix) + r"\d+")
    for rec in state.hosts():
        if (not ours.fullmatch(rec.name) or rec.index > n) and not hosts.running_pid(rec.name, rec.pid):
            # a record of a host that no longer runs (a crash, a reboot): left in place it
            # would stay in known_hosts, /etc/hosts and `lab.status` as a stopped phantom
            _forget(state, rec.name)
    other = [r.name for r in state.hosts() if not ours.fullmatch(r.name)]
    if other:
        raise VfleetError(
            f"lab: hosts {', '.join(other)} of another prefix are up; fix: "
            "`invoke lab.down` first (one lab per machine)"
        )
    ensure_lab_key(state)
    _raise_limits(state)
    network.ensure_bridge()
    rootfs.ensure_nspawn_tmpfs()

    cpu_plan = {
        name: cpus.to_list(c)
        for name, c in cpus.assign([f"{prefix}{i}" for i in range(1, n + 1)], gateways, cpus.available()).items()
    }
    wanted: list[HostRecord] = []
    for i in range(1, n + 1):
        name = f"{prefix}{i}"
        rec = state.load_host(name) or HostRecord(name=name, index=i, ip=host_ip(i), uuid=uuid.uuid4().hex)
        spec = extra.get(name) or gpu_profile or rec.profile_dir or profiles.DEFAULT_PROFILE
        prof = profiles.resolve(spec)
        rec.profile, rec.profile_dir = prof.name, str(prof.path)
        state.host_dir(name).mkdir(parents=True, exist_ok=True)
        rec.extra["cpus"] = cpu_plan[name]
        guest.host_keypair(state.host_dir(name), name)
        state.save_host(rec)
        wanted.append(rec)
    everyone = state.hosts()
    known = _known_hosts(state, everyone)
    state.known_hosts.write_text(known)
    etc_hosts = guest.hosts_file([(r.name, r.ip) for r in everyone])

    for rec in everyone:
        pid = hosts.running_pid(rec.name, rec.pid)
        root = state.host_dir(rec.name) / "root"
        prof = profiles.resolve(rec.profile_dir)
        if pid:
            rec.pid = pid
            if rec.name in {w.name for w in wanted} and rec.extra.get("backing", backing) != backing:
                echo(
                    f"{rec.name}: keeps running on {rec.extra['backing']} (--backing {backing} "
                    "applies when a host starts; `invoke lab.down` to change it)"
                )
            guest.refresh_names(root, known, etc_hosts)
            profiles.install(prof, root)
            if rec.name in cpu_plan:
                _hold(rec, echo)
            state.save_host(rec)
            continue
        if rec.name not in {w.name for w in wanted}:
            continue  # beyond N and stopped since the check above: the next `up` forgets it
        _kill_leftovers(rec.name)  # a crashed host restarts clean
        rootfs.unmount_tree(state.host_dir(rec.name))
        network.ensure_host_net(rec.name, rec.ip)
        root = rootfs.mount_overlay(state.host_dir(rec.name), backing=backing)
        rec.extra["backing"] = backing
        if not is_mountpoint(root):
            raise VfleetError(
                f"lab: overlay for {rec.name} not mounted at {root}; fix: check `dmesg` for overlayfs errors"
            )
        guest.prepare(root, state.host_dir(rec.name), rec.name, rec.uuid, state.key, known, etc_hosts)
        profiles.install(prof, root)
        rec.pid = hosts.start(rec.name, root, rec.uuid, state.host_dir(rec.name) / "console.log", rec.extra["cpus"])
        state.save_host(rec)
        echo(f"{rec.name}: starting ({rec.ip}, profile {rec.profile}, cpus {rec.extra['cpus']}, pid {rec.pid})")

    wanted = [state.load_host(r.name) or r for r in wanted]  # pids as started above

    def ready(rec: HostRecord) -> hosts.Readiness:
        return hosts.wait_ready(rec.name, rec.ip, state.key, state.known_hosts, timeout, rec.pid)

    with ThreadPoolExecutor(max_workers=min(32, len(wanted))) as pool:
        results = list(pool.map(ready, wanted))
    for res in results:
        line = f"{res.name}: {res.state} after {res.seconds:.1f}s on cpus {cpu_plan[res.name]}"
        if res.failed_units:
            line += " (failed: " + "; ".join(res.failed_units) + ")"
        if not res.ok:
            line += f" ({res.detail}; log: {state.host_dir(res.name) / 'console.log'})"
        echo(line)
    path = inventory_writer.write(state, wanted, gateways)
    echo(f"inventory: {path}")
    bad = [r.name for r in results if not r.ok]
    if bad:
        raise VfleetError(
            f"lab: {', '.join(f'{r.name} {r.state}' for r in results if not r.ok)}"
            f" (not running/degraded, limit {timeout:.0f}s); fix: read "
            f"{state.hosts_dir}/<host>/console.log, then `invoke lab.down` and retry"
        )
    return UpResult(inventory=path, hosts=wanted, readiness=results)


def residue(state_dir: str | None = None) -> Residue:
    """Everything of the lab's still on the machine, found by name pattern and state."""
    state = LabState(state_dir)
    res = Residue()
    res.nspawn_pids = hosts.lab_nspawn_pids()
    res.netns = network.lab_netns()
    res.netns_pids = [p for ns in res.netns for p in network.netns_pids(ns)]
    res.veths = network.lab_veths()
    res.bridge = BRIDGE in network.links()
    res.cgroups = [str(d) for d in cgroups.leftover_dirs()]
    res.mounts = sorted(set(rootfs.lab_mounts()) | set(rootfs.mounts_under(state.hosts_dir)))
    return res


def down(state_dir: str | None = None, echo: Echo = print) -> Residue:
    """Stop and remove every host, mount, namespace, veth and the bridge; keep the key.
    Works after a crash or a half-finished `up`: leftovers are found by name pattern.
    Folders other tools keep in the state dir (demo/, bench/) are theirs and stay."""
    require_root()
    state = LabState(state_dir)
    pids = set(hosts.lab_nspawn_pids())
    for rec in state.hosts():
        pid = hosts.running_pid(rec.name, rec.pid)
        if pid:
            pids.add(pid)
    if pids:
        echo(f"stopping {len(pids)} host(s)")
        survivors = hosts.stop(sorted(pids))
        if survivors:
            echo(f"warning: pids {survivors} survived SIGKILL")
    names = {ns[len(network.NETNS_PREFIX) :] for ns in network.lab_netns()}
    names |= {d.name for d in cgroups.leftover_dirs() if d.parent.name == cgroups.LAB_GROUP}
    for name in sorted(names):
        _kill_leftovers(name)
    cgroups.remove()
    rootfs.unmount(rootfs.mounts_under(state.hosts_dir))
    rootfs.unmount([m for m in rootfs.lab_mounts() if m != str(rootfs.NSPAWN_RUN)])
    network.remove_all()
    rootfs.release_nspawn_tmpfs()
    _restore_limits(state)
    hosts.reap_exited()
    left = residue(state_dir)
    if left.mounts:
        echo(f"warning: still mounted: {', '.join(left.mounts)}; state kept")
    else:
        if state.hosts_dir.exists():
            shutil.rmtree(state.hosts_dir)
        for path in (state.known_hosts, state.inventory, state.lab_file):
            path.unlink(missing_ok=True)
    echo("lab is down" if not left else f"lab down left residue: {left}")
    return left


def _probe(state: LabState, rec: HostRecord) -> HostStatus:
    pid = hosts.running_pid(rec.name, rec.pid)
    if not pid:
        return HostStatus(rec.name, rec.ip, rec.profile, 0, "stopped", rec.extra.get("cpus", ""))
    try:
        proc = subprocess.run(
            hosts.ssh_cmd(state.key, state.known_hosts, rec.ip, "systemctl is-system-running", timeout=3),
            capture_output=True,
            text=True,
            timeout=15,
        )
        st = proc.stdout.strip() or "unreachable"
    except subprocess.TimeoutExpired:
        st = "unreachable"
    return HostStatus(rec.name, rec.ip, rec.profile, pid, st, cgroups.bound_cpus(rec.name) or rec.extra.get("cpus", ""))


def status(state_dir: str | None = None) -> list[HostStatus]:
    """Each recorded host with its nspawn PID and `systemctl is-system-running` state."""
    state = LabState(state_dir)
    recs = state.hosts()
    if not recs:
        return []
    with ThreadPoolExecutor(max_workers=min(32, len(recs))) as pool:
        return list(pool.map(lambda r: _probe(state, r), recs))


def format_status(rows: list[HostStatus], left: Residue | None = None) -> str:
    """Plain table for `lab.status` (stable columns: tests and people read it)."""
    if not rows:
        text = "no lab hosts"
    else:
        width = max(len(r.name) for r in rows)
        prof = max(len("PROFILE"), *(len(r.profile) for r in rows))
        text = "\n".join(
            [f"{'HOST':<{width}}  {'ADDRESS':<13}  {'STATE':<11}  {'PID':>7}  {'PROFILE':<{prof}}  CPUS"]
            + [
                f"{r.name:<{width}}  {r.ip:<13}  {r.state:<11}  {r.pid or '-':>7}  {r.profile:<{prof}}  {r.cpus or '-'}"
                for r in rows
            ]
        )
    if left is not None and not rows and left:
        text += f"\nleftovers (run `invoke lab.down`): {left}"
    return text
