"""The lab itself: real hosts that boot, talk SSH to the machine and to each other, replay
their GPU profile, and leave nothing behind after `down` (also after a crash)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from vfleet.lab import hosts as lab_hosts
from vfleet.lab.state import LabState

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def ssh(host_ip: str, command: str, timeout: float = 30) -> subprocess.CompletedProcess:
    state = LabState()
    return subprocess.run(
        lab_hosts.ssh_cmd(state.key, state.known_hosts, host_ip, command),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def inventory_hosts(path: Path) -> dict[str, dict]:
    data = yaml.safe_load(path.read_text())["all"]
    return {name: hv for group in data["children"].values() for name, hv in (group.get("hosts") or {}).items()}


@pytest.fixture(scope="module")
def lab_inventory(lab):
    """These tests check what a fresh lab host is (nginx installed but disabled, ...): a lab
    left deployed by an earlier run is made anew first."""
    return lab.pristine()


def pids() -> dict[str, int]:
    return {r.name: r.pid for r in LabState().hosts()}


def test_inventory_shape(lab_inventory):
    data = yaml.safe_load(lab_inventory.read_text())["all"]
    state = LabState()
    assert data["vars"]["ansible_user"] == "root"
    assert data["vars"]["ansible_ssh_private_key_file"] == str(state.key)
    assert data["vars"]["known_hosts_file"] == str(state.known_hosts)
    vllm, gw = data["children"]["vllm"]["hosts"], data["children"]["gateways"]["hosts"]
    assert list(vllm) == ["lab1", "lab2"] and list(gw) == ["lab3"]
    assert gw["lab3"] == {"ansible_host": "10.213.0.13", "gpu_profile": "h200-1"}


def test_hosts_are_distinct_running_systems(lab_inventory):
    seen_ids = set()
    for name, hv in inventory_hosts(lab_inventory).items():
        res = ssh(
            hv["ansible_host"],
            "hostname; cat /etc/machine-id; systemctl is-system-running;"
            " ip route show default | wc -l; systemctl is-enabled nginx postgresql;"
            " systemctl is-active ssh; test -x /usr/sbin/nginx && echo nginx-installed",
        )
        assert res.returncode != 255, res.stderr
        name_out, machine_id, state, default_routes, *rest = res.stdout.split()
        assert (name_out, state, default_routes) == (name, "running", "0")
        assert rest == ["disabled", "masked", "active", "nginx-installed"]
        seen_ids.add(machine_id)
    assert len(seen_ids) == len(inventory_hosts(lab_inventory))


def test_each_host_has_its_own_cgroup_tree(lab_inventory):
    # Shared /payload cgroups made units fail at random (status=219/CGROUP) and let a stop
    # on one host wait on another host's processes.
    # Seen from the machine (inside, a cgroup namespace shows every host "/init.scope").
    for name in inventory_hosts(lab_inventory):
        procs = subprocess.run(["ip", "netns", "pids", f"vfl-{name}"], capture_output=True, text=True).stdout.split()
        assert procs
        for pid in procs:
            cg = Path(f"/proc/{pid}/cgroup").read_text()
            assert f"name=systemd:/vfleet-lab/{name}/payload/" in cg, (name, pid, cg)


def test_host_keys_are_unique_and_checked(lab_inventory):
    lines = LabState().known_hosts.read_text().splitlines()
    keys = [ln.split()[2] for ln in lines]
    assert len(keys) == len(set(keys)) >= 3
    assert all(ln.split()[0].startswith(("lab1,", "lab2,", "lab3,")) for ln in lines)


def test_ssh_and_rsync_between_hosts_by_name(lab_inventory):
    res = ssh(
        "10.213.0.11",
        "ssh -o BatchMode=yes lab2 hostname && "
        "echo payload > /tmp/f && rsync -a /tmp/f lab3:/tmp/from-lab1 && "
        "ssh -o BatchMode=yes lab3 cat /tmp/from-lab1",
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["lab2", "payload"]


def test_nvidia_smi_follows_profile_in_place(lab, lab_inventory):
    before = pids()
    inv = lab.ensure(3, profiles={"lab1": "v100-8-pcie", "lab2": "no-gpu"})
    try:
        assert inventory_hosts(inv)["lab1"]["gpu_profile"] == "v100-8-pcie"
        res = ssh(
            "10.213.0.11",
            "nvidia-smi --query-gpu=name,memory.total "
            "--format=csv,noheader,nounits | sort -u; nvidia-smi topo -m | head -2 | tail -1",
        )
        assert res.stdout.splitlines()[0] == "Tesla V100-PCIE-32GB, 32768"
        assert res.stdout.splitlines()[1].startswith("GPU0\t X \tPHB\tPHB\tPHB\tSYS")
        assert ssh("10.213.0.12", "nvidia-smi").returncode == 127
        lab.ensure(3, profiles={"lab1": "broken-driver"})
        res = ssh("10.213.0.11", "nvidia-smi -L")
        assert res.returncode == 9 and "couldn't communicate" in res.stdout
    finally:
        lab.ensure(3, gpu_profile="h200-1")
    assert pids() == before  # swapped in place: no host restarted
    res = ssh("10.213.0.12", "nvidia-smi --query-gpu=name --format=csv,noheader")
    assert res.stdout == "NVIDIA H200\n"


def test_up_again_keeps_running_hosts(lab, lab_inventory):
    before = pids()
    t0 = time.monotonic()
    assert lab.ensure(3) == lab_inventory
    assert pids() == before
    assert time.monotonic() - t0 < 20


def test_a_host_beyond_n_that_died_is_forgotten_by_the_next_up(lab, lab_inventory):
    # CI once began with the records of a 4-host lab whose processes were gone: `up 3`
    # restarted lab1..3 and kept lab4 as a stopped phantom in known_hosts and `lab.status`.
    lab.ensure(4)
    try:
        os.kill(pids()["lab4"], signal.SIGKILL)  # its systemd keeps running in the namespace
        lab.ensure(3)
    finally:
        lab.ensure(3)
    assert list(pids()) == ["lab1", "lab2", "lab3"]
    assert [ln.split(",")[0] for ln in LabState().known_hosts.read_text().splitlines()] == ["lab1", "lab2", "lab3"]
    assert "vfl-lab4" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "lab4" not in ssh("10.213.0.11", "cat /etc/hosts").stdout


def allowed_cpus(host_ip: str) -> set[str]:
    """Every distinct Cpus_allowed_list of the processes of a host (from inside it)."""
    out = ssh(host_ip, "cat /proc/[0-9]*/status 2>/dev/null | sed -n 's/^Cpus_allowed_list:\\s*//p' | sort -u")
    return set(out.stdout.split())


def test_each_vllm_host_runs_on_a_core_of_its_own_and_cannot_leave_it(lab, lab_inventory):
    """One core per vLLM host (lab1 core 0, lab2 core 1 of 2), the gateway on every core:
    every process of the host (its systemd, journald, sshd, a new login) is held there, and a
    process inside may not widen its affinity past it (the host's cpuset)."""
    machine = sorted(os.sched_getaffinity(0))
    want = {"10.213.0.11": str(machine[0]), "10.213.0.12": str(machine[1 % len(machine)])}
    for ip, core in want.items():
        assert allowed_cpus(ip) == {core}, ip
        widened = ssh(ip, f"taskset -pc {','.join(map(str, machine))} $$ && taskset -pc $$")
        assert widened.returncode != 0 or widened.stdout.split()[-1] == core, widened
    assert len(machine) < 2 or allowed_cpus("10.213.0.13") == {f"{machine[0]}-{machine[-1]}"}
    assert LabState().load_host("lab1").extra["cpus"] == want["10.213.0.11"]


def test_status_task_lists_hosts(lab_inventory):
    code = (
        "from invoke import Collection, Program; from vfleet.cli.lab import lab; "
        "ns = Collection(); ns.add_collection(lab); "
        "Program(namespace=ns).run(['x', 'lab.status'])"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["HOST", "ADDRESS", "STATE", "PID", "PROFILE", "CPUS"]
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    for name, rec_pid in pids().items():
        assert rows[name][2] == "running" and int(rows[name][3]) == rec_pid


def machine_residue() -> list[str]:
    """What an independent look at the machine finds of the lab (not via lab.api)."""
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"netns {ln.split()[0]}" for ln in netns.splitlines() if ln.startswith("vfl-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [
        f"link {ln.split(':')[1].strip()}"
        for ln in links.splitlines()
        if ln.split(":")[1].strip().startswith(("vfl-", "vfv-"))
    ]
    mounts = Path("/proc/self/mountinfo").read_text()
    found += [f"mount {ln.split()[4]}" for ln in mounts.splitlines() if "vfleet-lab" in ln or "/run/netns/vfl-" in ln]
    found += [f"cgroup {p}" for p in Path("/sys/fs/cgroup").glob("*/vfleet-lab")]
    found += [f"cgroup {p}" for p in Path("/sys/fs/cgroup").glob("vfleet-lab")]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if "systemd-nspawn" in args and "vfl-" in args and stat != "Z":
                found.append(f"process {proc.name}: {args[:80]}")
    return found


def test_down_up_leaves_no_residue_also_after_a_crash(lab, lab_inventory):
    state = LabState()
    shape = dict(lab.last)
    try:
        # A crash: one host's systemd-nspawn killed outright (its systemd keeps running),
        # plus the debris of a half-finished `up` (a namespace and veth, nothing else).
        os.kill(pids()["lab2"], signal.SIGKILL)
        subprocess.run(["ip", "netns", "add", "vfl-lab9"], check=True)
        subprocess.run(
            ["ip", "link", "add", "vfv-lab9", "type", "veth", "peer", "name", "eth0", "netns", "vfl-lab9"], check=True
        )
        left = lab.down()
        assert not left, left
        assert machine_residue() == []
        # What the lab made is gone; the key stays, and so do the folders that other tools keep
        # beside it (demo/, bench/: their deploy inventories and reports), which down never owned.
        left_names = {p.name for p in state.root.iterdir()}
        assert not left_names & {"hosts", "known_hosts", "inventory.yaml", "lab.json"}, left_names
        assert {"id_ed25519", "id_ed25519.pub"} <= left_names
        assert lab.down().__bool__() is False  # idempotent
        lab.ensure(2)
        res = ssh("10.213.0.12", "systemctl is-system-running")
        assert res.stdout.strip() == "running"
        assert not lab.down()
        assert machine_residue() == []
    finally:
        lab.restore(shape)
