"""Time for N light hosts to receive a model: one host alone, today's waves, the pipelined
chain (vfleet/roles/weights/_chain.py), and the physical limit (bytes over the link rate), in
one run; prints JSON with the ratios. Needs root (network namespaces, tc, sshd); no lab.

    python benchmarks/weights_pipeline.py --hosts 8,32,64 [--copy-s 30] [--out F]

Light hosts: one network namespace per host (vfb-h<i>, 10.214.0.<i+1>/24) and one for the
controller (vfb-c, 10.214.0.1), all on a bridge vfb-br0 made here; every link is limited both
ways with a tbf qdisc to the same rate, and each host runs its own sshd, so every byte crosses
real ssh sessions and a rate-limited link, as on a fleet. Hosts share this machine's disk and
its 2 cores: every host's files go to its own folder under a temp dir.

What each setting models (a 70B model in 16 bits, 140 GB, over 25-40 Gb/s links: 28-45 s a
copy, 4 MiB pieces, ssh sessions that start in well under a second):
- --rate-mbit / --aggregate-mbit: the link rate. The 2 cores carry every host's ssh, sshd and
  relay at once (about 700 Mbit/s of links in all, measured), so a fleet of N gets links of
  min(--rate-mbit, --aggregate-mbit / N): 40, 10 and 5 Mbit/s for 8, 32 and 64 hosts. A
  fleet's one-host time, waves, chain and limit are all taken at its rate, one after another.
- --copy-s (30): the model's size is chosen per fleet so that one copy over one link takes
  this long, as a 140 GB copy does on a fleet: 143, 36 and 18 MiB at 40, 10 and 5 Mbit/s.
  What does not shrink with the rate (ssh start-up, a hop's scheduling delay) then weighs
  on the chain as it would on a fleet, not more (a smaller model makes it weigh more).
- --piece-kib (4096): the product's default piece (pieces.DEFAULT_PIECE_SIZE). A hop passes
  bytes on as they arrive (cut-through), so the piece sets the resume and re-send unit, not
  each hop's delay.
- --pace (0.92): the chain's feed as a share of the link rate (chain.run_chain's bwlimit, as
  weights_bwlimit). TCP/IP framing takes 4.4% of a tbf-limited link, so 0.92 is ~96% of what
  the link carries in payload: links of equal rate in a row otherwise turn every scheduling
  hiccup of 64 hosts on 2 cores into a backlog that never drains. The one-host chain is not
  paced. Measured at 64 hosts: 0.92 1.24x, 0.95 1.26x.
What does not scale like a fleet, and is counted as measured: each hop's ssh passes a packet
on only once it is whole (up to 32 KiB: 52 ms at 5 Mbit/s, 10 us at 25 Gb/s), so the last host
finishes ~3 s after the first at 64 hosts; and the 2N ssh sessions of a chain all start on
these 2 cores (3.5-4 s at 64 hosts, a fleet's hosts each start their own).
Settings that make the namespaces behave like fleet hosts rather than this machine: ssh with
curve25519 key exchange and AES-GCM (the default post-quantum exchange costs 0.15 s of CPU a
connection, which a fleet spends on separate hosts and this machine serialises), SHLVL=1
passed to the sessions (this machine's root .bashrc runs pyenv init, 0.2 s, for every ssh
command; bash reads it for ssh commands only at shell level 1), tcp_notsent_lowat 16 KiB
in every namespace and tbf queues of 5 ms (at tens of Mbit/s the defaults queue seconds of data
per link, which a 25 Gb/s fleet link drains in a millisecond).

What is timed, in every case until every host holds every byte, each sha256-checked once:
- one host: the controller sends to one host (rsync + sha256sum -c, as sync.py; and a chain of 1);
- waves: sync.py's fan-out, every holder (the controller too, the brief's generous reading;
  sync.py itself feeds from the controller only in the first wave) feeds one new host per
  wave, rsync pulls over ssh then `sha256sum -c`, ceil(log2(N+1)) waves;
- chain: chain.distribute over the N hosts (relays check each piece as it lands). Also
  reported: its start-up (every session up and every hop's `have` in, before the first
  byte) and the spread (first host whole to last).
Everything made here (namespaces, veths, the bridge, sshd processes, the temp dir) is removed
in a finally, also on Ctrl-C or SIGTERM; only processes started here are ended, by their pid.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import emit  # benchmarks/common.py (scripts run from benchmarks/ or by path)

from vfleet.roles.weights import _chain as chain, _pieces as pieces

NET = "10.214.0"
BRIDGE = "vfb-br0"
CONTROLLER = "vfb-c"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def ns_name(i: int) -> str:
    """Namespace i: 0 is the controller, 1..N the hosts."""
    return CONTROLLER if i == 0 else f"vfb-h{i}"


def address(i: int) -> str:
    return f"{NET}.{i + 1}"


class Lab:
    """The namespaces, links and sshds of one run; close() undoes all of it."""

    def __init__(self, root: Path, hosts: int, rate_mbit: float) -> None:
        self.root, self.hosts, self.rate = root, hosts, rate_mbit
        self.namespaces: list[str] = []
        self.links: list[str] = []
        self.shaped: list[tuple[list[str], str]] = []
        self.sshd: list[subprocess.Popen] = []
        self.bridge = False
        self.made_run_sshd = False
        self.key = root / "id_ed25519"
        self.ssh = [
            "ssh",
            "-F",
            "/dev/null",
            "-i",
            str(self.key),
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            "SetEnv=SHLVL=1",
            "-o",
            "KexAlgorithms=curve25519-sha256",
            "-o",
            "Ciphers=aes128-gcm@openssh.com",
        ]

    def _shape(self, ns: list[str], dev: str, verb: str = "add") -> None:
        burst = max(16 << 10, int(self.rate * 1e6 / 8 / 100))  # 10 ms of rate, and whole GSO packets
        sh(
            *ns,
            "tc",
            "qdisc",
            verb,
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            f"{self.rate}mbit",
            "burst",
            str(burst),
            "latency",
            "5ms",
        )
        if verb == "add":
            self.shaped.append((ns, dev))

    def set_rate(self, rate_mbit: float) -> None:
        """Every link, both ways, to this rate (a fleet size gets its own: see main)."""
        self.rate = rate_mbit
        for ns, dev in self.shaped:
            self._shape(ns, dev, "change")

    def up(self) -> None:
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / "host_key"))
        conf = self.root / "sshd_config"
        conf.write_text(
            f"HostKey {self.root / 'host_key'}\nAuthorizedKeysFile {self.key}.pub\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\n"
            "StrictModes no\nUseDNS no\nMaxStartups 200\nMaxSessions 200\nLogLevel ERROR\n"
            "AcceptEnv SHLVL\n"
        )
        if not Path("/run/sshd").exists():  # sshd's privilege-separation dir (Debian makes it at boot)
            os.makedirs("/run/sshd", mode=0o755)
            self.made_run_sshd = True
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        self.bridge = True
        sh("ip", "link", "set", BRIDGE, "up")
        for i in range(self.hosts + 1):
            ns, veth = ns_name(i), f"vfb-v{i}"
            sh("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            self.links.append(veth)
            sh("ip", "link", "set", veth, "master", BRIDGE, "up")
            inside = ["ip", "netns", "exec", ns]
            sh(*inside, "ip", "addr", "add", f"{address(i)}/24", "dev", "eth0")
            sh(*inside, "ip", "link", "set", "eth0", "up")
            sh(*inside, "ip", "link", "set", "lo", "up")
            # at tens of Mbit/s a socket's default unsent backlog is seconds of data, which a
            # 25 Gb/s fleet link drains in a millisecond: bound it as that network would
            sh(*inside, "sysctl", "-q", "-w", "net.ipv4.tcp_notsent_lowat=16384")
            self._shape(inside, "eth0")  # what the host sends
            self._shape([], veth)  # what it receives
            if i:
                self.sshd.append(
                    subprocess.Popen(
                        [
                            *inside,
                            "/usr/sbin/sshd",
                            "-D",
                            "-e",
                            "-f",
                            str(conf),
                            "-o",
                            f"ListenAddress={address(i)}",
                            "-o",
                            f"PidFile={self.root / f'sshd{i}.pid'}",
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
        deadline = time.monotonic() + 30
        for i in range(1, self.hosts + 1):
            while self.run_in(0, ["true"], host=i, check=False).returncode != 0:
                if time.monotonic() > deadline:
                    raise SystemExit(f"sshd in {ns_name(i)} did not answer")
                time.sleep(0.2)

    def run_in(self, ns: int, cmd: list[str], *, host: int | None = None, check: bool = True):
        """A command in namespace `ns`, or over ssh from there on `host`."""
        argv = ["ip", "netns", "exec", ns_name(ns)]
        argv += [*self.ssh, f"root@{address(host)}", " ".join(cmd)] if host is not None else cmd
        return sh(*argv, check=check)

    def close(self) -> None:
        for p in self.sshd:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.sshd:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for veth in self.links:
            sh("ip", "link", "del", veth, check=False)
        for ns in self.namespaces:
            sh("ip", "netns", "del", ns, check=False)
        if self.bridge:
            sh("ip", "link", "del", BRIDGE, check=False)
        if self.made_run_sshd:
            shutil.rmtree("/run/sshd", ignore_errors=True)


def make_model(root: Path, mib: int) -> Path:
    model = root / "model"
    shutil.rmtree(model, ignore_errors=True)
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}\n')
    with open(model / "model.safetensors", "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    return model


def dest(root: Path, case: str, i: int) -> str:
    return str(root / "hosts" / f"h{i}" / case / "staging")


def rsync_copy(lab: Lab, model: Path, root: Path, case: str, src: int, dst: int) -> subprocess.Popen:
    """One full copy as sync.py makes it: rsync (push from the controller, pull from a peer),
    then sha256sum -c of the copy before it may feed anyone."""
    e = " ".join(lab.ssh)
    to = dest(root, case, dst)
    os.makedirs(to, exist_ok=True)  # the hosts share this disk: their folders are made here
    if src == 0:
        cmd = (
            f"ip netns exec {CONTROLLER} rsync -a --partial -e '{e}' {model}/ root@{address(dst)}:{to}/ && "
            f"cd {to} && sha256sum --quiet --strict -c MANIFEST.sha256"
        )
    else:
        cmd = (
            f"ip netns exec {ns_name(dst)} rsync -a --partial -e '{e}' "
            f"root@{address(src)}:{dest(root, case, src)}/ {to}/ && "
            f"cd {to} && sha256sum --quiet --strict -c MANIFEST.sha256"
        )
    return subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def waves(lab: Lab, model: Path, root: Path, n: int, case: str) -> tuple[float, int]:
    """(seconds, waves): every holder, the controller included, feeds one new host a wave."""
    t0, have, todo, count = time.monotonic(), [0], list(range(1, n + 1)), 0
    while todo:
        count += 1
        pairs = list(zip(have, todo))
        procs = [(dst, rsync_copy(lab, model, root, case, src, dst)) for src, dst in pairs]
        for dst, p in procs:
            _, err = p.communicate()
            if p.returncode:
                raise SystemExit(f"wave {count}: copy to h{dst} failed: {err.decode()[-300:]}")
        have += [dst for _, dst in pairs]
        todo = todo[len(pairs) :]
    return time.monotonic() - t0, count


def chain_run(
    lab: Lab, model: Path, pm: pieces.PieceManifest, root: Path, n: int, case: str, bwlimit: float | None
) -> tuple[float, float, float]:
    """(seconds in all, start-up before the first byte, first host whole to last), with the
    product's defaults (three rounds, slow hosts routed around)."""
    hops = [
        chain.ssh_hop(
            f"h{i}",
            dest(root, case, i),
            address=address(i),
            user="root",
            port=22,
            controller_ssh=["ip", "netns", "exec", CONTROLLER, *lab.ssh],
            peer_ssh=lab.ssh,
        )
        for i in range(1, n + 1)
    ]
    t0 = time.monotonic()
    marks: dict[str, float] = {}
    whole: list[float] = []

    def seen(e: dict) -> None:
        if e["event"] == "feeding":
            marks["feeding"] = time.monotonic() - t0
        elif e["event"] == "done" and e.get("whole"):
            whole.append(time.monotonic() - t0)

    out = chain.distribute(model, pm, hops, bwlimit=bwlimit, on_event=seen)
    if out.failed:
        raise SystemExit(f"chain over {n} hosts failed: {out.failed}")
    for note in out.notes:  # a host routed around (the product's rule, as in a deploy) is timed too
        print(f"chain over {n} hosts: {note}", file=sys.stderr, flush=True)
    return time.monotonic() - t0, marks.get("feeding", 0.0), (max(whole) - min(whole)) if whole else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="8,32,64", help="comma-separated fleet sizes")
    ap.add_argument(
        "--copy-s",
        type=float,
        default=30.0,
        help="one copy's time over one link: sets each fleet's model size (see above)",
    )
    ap.add_argument("--rate-mbit", type=float, default=40.0, help="every link's rate, both ways, at most")
    ap.add_argument(
        "--aggregate-mbit",
        type=float,
        default=320.0,
        help="links x rate this machine is asked to carry at once (2 cores: ~700 measured)",
    )
    ap.add_argument("--pace", type=float, default=0.92, help="the chain's feed, as a share of the link rate")
    ap.add_argument("--piece-kib", type=int, default=pieces.DEFAULT_PIECE_SIZE >> 10)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below cleans up
    sizes = [int(x) for x in args.hosts.split(",")]
    root = Path(tempfile.mkdtemp(prefix="vfb-"))
    lab = Lab(root, max(sizes), args.rate_mbit)

    def clean() -> None:
        shutil.rmtree(root / "hosts", ignore_errors=True)

    try:
        lab.up()
        out: dict = {"copy_s": args.copy_s, "piece_bytes": args.piece_kib << 10, "pace": args.pace, "fleets": []}
        for n in sizes:
            rate = min(args.rate_mbit, args.aggregate_mbit / n)
            lab.set_rate(rate)
            model = make_model(root, max(1, round(rate * 1e6 / 8 * args.copy_s / 2**20)))
            pm = pieces.make_piece_manifest(model, args.piece_kib << 10)
            limit = pm.total_bytes * 8 / (rate * 1e6)
            one_rsync, _ = waves(lab, model, root, 1, f"one{n}")
            clean()
            one_chain, one_start, _ = chain_run(lab, model, pm, root, 1, f"one-chain{n}", None)
            clean()
            t_waves, count = waves(lab, model, root, n, f"waves{n}")
            clean()
            t_chain, start, spread = chain_run(lab, model, pm, root, n, f"chain{n}", args.pace * rate * 1e6 / 8)
            clean()
            out["fleets"].append(
                {
                    "hosts": n,
                    "rate_mbit": rate,
                    "model_bytes": pm.total_bytes,
                    "physical_limit_s": round(limit, 2),
                    "one_host_rsync_s": round(one_rsync, 2),
                    "one_host_chain_s": round(one_chain, 2),
                    "waves": count,
                    "waves_s": round(t_waves, 2),
                    "chain_s": round(t_chain, 2),
                    "chain_start_s": round(start, 2),
                    "one_host_chain_start_s": round(one_start, 2),
                    "chain_spread_s": round(spread, 2),
                    "chain_over_one_host": round(t_chain / one_chain, 2),
                    "waves_over_one_host": round(t_waves / one_rsync, 2),
                    "chain_over_limit": round(t_chain / limit, 2),
                    "waves_over_limit": round(t_waves / limit, 2),
                }
            )
            print(out["fleets"][-1], file=sys.stderr, flush=True)
    finally:
        lab.close()
        shutil.rmtree(root, ignore_errors=True)
    return emit(out, args.out)


if __name__ == "__main__":
    sys.exit(main())
