"""The same fact gathering on N lab hosts with vfleet, ansible-core and pyinfra, in one run:
wall time per tool (median of --repeat, runs interleaved) and each peer's time as a ratio to
vfleet's. Needs root (the lab) and the peers in a separate venv, never in vfleet's:

    python3 -m venv /work/race-venv && /work/race-venv/bin/pip install ansible-core pyinfra
    flock /tmp/vfleet-lab.lock python benchmarks/peer_race.py --sizes 5,20 --peer-venv /work/race-venv

The facts (what preflight needs most): the GPU query, `nvidia-smi topo -m`, the disk where the
weights go, /dev/shm, the kernel. Cases:
  vfleet_preflight   `vfleet preflight`: ALL its facts (16 commands: those five and nvidia-smi,
                     os-release, NCCL files, model files...) in one round trip, plus the audit
  vfleet_run         `vfleet run --command SCRIPT`: the five commands, one round trip
  ansible_shell      `ansible all -m shell -a SCRIPT`: the same script, one task
  ansible_playbook   a playbook of five `command` tasks (how an Ansible user writes it)
  pyinfra_exec       `pyinfra INV exec -- SCRIPT`
  pyinfra_shell      a deploy file with `server.shell(SCRIPT)`
  vfleet_deploy_check  (with --deploy-vars INVENTORY) `vfleet deploy --check --force` over the same
                     hosts with that inventory's vars, last host the gateway: preflight, then every
                     step's facts and renders (weights, install, service, gateway), nothing applied
Every tool gets the same forks (--forks, default: all hosts at once, pyinfra's default), the
same key and known_hosts with host keys checked, and starts cold: Ansible's ControlPersist
sockets go into a fresh folder each run, so no run reuses the previous run's connections.
vfleet's modules are byte-compiled first, as pip compiles the peers' (byte_compile). Before
the sizes, each tool's fixed cost: `true` on the controller, no SSH (startup_s in the JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer_inventories as pinv  # noqa: E402
from common import emit  # noqa: E402

from vfleet.roles.preflight._parsers.query_gpu_csv import FIELDS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
COMMANDS = [
    f"nvidia-smi --query-gpu={','.join(FIELDS)} --format=csv",
    "nvidia-smi topo -m",
    "df -P -B1 -T /var/lib",
    "df -P -B1 /dev/shm",
    "uname -r",
]
SCRIPT = "; ".join(COMMANDS)
ALL_CASES = [
    "vfleet_preflight",
    "vfleet_run",
    "ansible_shell",
    "ansible_playbook",
    "pyinfra_exec",
    "pyinfra_shell",
    "vfleet_deploy_check",
]


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def vfleet_ok(report: Path, n: int, case: str) -> str | None:
    """None when every host answered (preflight: facts gathered; run: the command succeeded)."""
    data = json.loads(report.read_text())
    hosts = data["hosts"]
    if case == "vfleet_preflight":
        bad = [h for h, r in hosts.items() if not r.get("facts")]
    else:
        bad = [h for h, r in hosts.items() if r["status"] not in ("changed", "ok")]
    if len(hosts) == n and not bad:
        return None
    why = {
        h: [s.get("message", "") for s in hosts[h].get("steps", []) if s.get("status") != "ok"][-1:] for h in bad[:5]
    }
    return f"{len(hosts)} hosts, {len(bad)} without an answer, e.g. {why}"


def ansible_ok(out: str, n: int, case: str) -> str | None:
    if case == "ansible_shell":
        good = len(re.findall(r"^\S+ \| (CHANGED|SUCCESS) ", out, re.M))
    else:
        good = len(re.findall(r"^\S+\s+: ok=5 .*unreachable=0\s+failed=0", out, re.M))
    return None if good == n else f"{good} of {n} hosts succeeded"


def build_cases(
    work: Path,
    n: int,
    forks: int,
    peer_bin: Path,
    lab_vars: dict,
    hosts: list[tuple[str, str]],
    wanted: list[str],
    deploy_vars: Path | None,
) -> dict[str, dict]:
    d = work / f"n{n}"
    d.mkdir(parents=True, exist_ok=True)
    vinv = pinv.write_vfleet(d, lab_vars, hosts)
    ainv = pinv.write_ansible(d, lab_vars, hosts)
    pyinv = pinv.write_pyinfra(d, lab_vars, hosts)
    vf = [sys.executable, "-m", "vfleet.cli"]
    report = d / "report.json"
    cases = {
        "vfleet_preflight": {
            "argv": vf + ["preflight", "--inventory", str(vinv), "--forks", str(forks), "--report", str(report)],
            "report": report,
            "rc": (0, 1),
        },
        "vfleet_run": {
            "argv": vf
            + [
                "run",
                "--inventory",
                str(vinv),
                "--forks",
                str(forks),
                "--quiet",
                "--report",
                str(report),
                "--command",
                SCRIPT,
            ],
            "report": report,
        },
        "ansible_shell": {
            "argv": [
                str(peer_bin / "ansible"),
                "all",
                "-i",
                str(ainv),
                "-f",
                str(forks),
                "-o",
                "-m",
                "shell",
                "-a",
                SCRIPT,
            ]
        },
        "ansible_playbook": {
            "argv": [
                str(peer_bin / "ansible-playbook"),
                "-i",
                str(ainv),
                "-f",
                str(forks),
                str(pinv.write_playbook(d, COMMANDS)),
            ]
        },
        "pyinfra_exec": {
            "argv": [str(peer_bin / "pyinfra"), "-y", "--parallel", str(forks), str(pyinv), "exec", "--", SCRIPT]
        },
        "pyinfra_shell": {
            "argv": [
                str(peer_bin / "pyinfra"),
                "-y",
                "--parallel",
                str(forks),
                str(pyinv),
                str(pinv.write_pyinfra_deploy(d, SCRIPT)),
            ]
        },
    }
    if deploy_vars:
        dinv = pinv.write_deploy(d, lab_vars, hosts, deploy_vars)
        cases["vfleet_deploy_check"] = {
            "argv": vf
            + [
                "deploy",
                "--inventory",
                str(dinv),
                "--forks",
                str(forks),
                "--check",
                "--force",
                "--report",
                str(report),
            ],
            "report": report,
            "rc": (0, 1),
        }
    return {k: v for k, v in cases.items() if k in wanted}


def run_case(name: str, case: dict, n: int) -> float:
    """Wall seconds of one run, from process start to exit; SystemExit when a host did not answer."""
    env = dict(
        os.environ,
        ANSIBLE_HOST_KEY_CHECKING="True",
        ANSIBLE_LOCALHOST_WARNING="False",
        ANSIBLE_NOCOLOR="1",
        PYINFRA_PROGRESS="off",
        ANSIBLE_DEPRECATION_WARNINGS="False",
    )
    with tempfile.TemporaryDirectory(prefix="race-cp-") as cp:
        env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = cp  # cold start: no reused ControlMaster
        t0 = time.perf_counter()
        p = subprocess.run(case["argv"], capture_output=True, text=True, env=env, cwd=REPO)
        elapsed = time.perf_counter() - t0
    if p.returncode not in case.get("rc", (0,)):
        raise SystemExit(f"{name} on {n} hosts failed (exit {p.returncode}): {(p.stderr or p.stdout)[-1500:]}")
    problem = None
    if "report" in case:
        problem = vfleet_ok(case["report"], n, name)
    elif name.startswith("ansible"):
        problem = ansible_ok(p.stdout, n, name)
    if problem:
        raise SystemExit(f"{name} on {n} hosts: {problem}: {(p.stdout + p.stderr)[-1500:]}")
    return elapsed


def byte_compile() -> None:
    """vfleet's own modules compiled once before the race, as pip compiles the peers' at install.
    Why: vfleet runs from an editable checkout, and where PYTHONDONTWRITEBYTECODE is set (it is
    on this machine) every start compiled each module it imports from source (~0.1 s)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(REPO / p) for p in ("vfleet",))], check=True)


def startup(work: Path, peer_bin: Path, repeat: int) -> dict[str, float]:
    """Each tool's fixed cost: `true` on the controller itself (local connection, no SSH), median
    of `repeat` runs. What a tool spends before and after its hosts, whatever their number."""
    inv = work / "local.yaml"
    inv.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    argv = {
        "vfleet_run": [
            sys.executable,
            "-m",
            "vfleet.cli",
            "run",
            "--inventory",
            str(inv),
            "--quiet",
            "--command",
            "true",
        ],
        "ansible_shell": [
            str(peer_bin / "ansible"),
            "all",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-o",
            "-e",
            "ansible_python_interpreter=/usr/bin/python3",
            "-m",
            "shell",
            "-a",
            "true",
        ],
        "pyinfra_exec": [str(peer_bin / "pyinfra"), "-y", "@local", "exec", "--", "true"],
    }
    argv = {k: v for k, v in argv.items() if k.startswith("vfleet") or Path(v[0]).exists()}
    runs: dict[str, list[float]] = {k: [] for k in argv}
    for _ in range(repeat):
        for name, cmd in argv.items():
            t0 = time.perf_counter()
            p = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                cwd=REPO,
                env=dict(os.environ, ANSIBLE_LOCALHOST_WARNING="False", PYINFRA_PROGRESS="off"),
            )
            runs[name].append(round(time.perf_counter() - t0, 3))
            if p.returncode:
                raise SystemExit(
                    f"start-up run of {name} failed (exit {p.returncode}): {(p.stderr or p.stdout)[-800:]}"
                )
    return {k: round(statistics.median(v), 3) for k, v in runs.items()}


def race(n: int, cases: dict[str, dict], repeat: int) -> dict:
    """A case that fails is reported with its reason and left out of later rounds: one peer's
    failure must not cost the others' figures."""
    runs: dict[str, list[float]] = {k: [] for k in cases}
    errors: dict[str, str] = {}
    for _ in range(repeat):  # interleaved, so drift on the shared machine hits every case alike
        for name, case in cases.items():
            if name in errors:
                continue
            try:
                runs[name].append(round(run_case(name, case, n), 3))
            except SystemExit as exc:
                errors[name] = str(exc)[-2000:]
                print(f"  {n} hosts {name}: FAILED {str(exc)[:300]}", file=sys.stderr, flush=True)
                continue
            print(f"  {n} hosts {name}: {runs[name][-1]:.2f} s", file=sys.stderr, flush=True)
    med = {k: round(statistics.median(v), 3) for k, v in runs.items() if v and k not in errors}
    ratios = {}
    for ref in ("vfleet_preflight", "vfleet_run"):
        if ref in med:
            ratios[f"over_{ref}"] = {k: round(v / med[ref], 2) for k, v in med.items() if not k.startswith("vfleet")}
    if "vfleet_deploy_check" in med and "vfleet_preflight" in med:
        ratios["deploy_check_over_preflight"] = round(med["vfleet_deploy_check"] / med["vfleet_preflight"], 2)
    return {"hosts": n, "median_s": med, "runs_s": runs, "ratio_peer_over_vfleet": ratios, "errors": errors}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes",
        default="5,20",
        help="host counts, comma-separated (the lab is brought up to the largest; each size uses lab1..labN)",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--forks", type=int, default=0, help="forks for every tool; 0 = the size")
    ap.add_argument("--cases", default=",".join(ALL_CASES), help=f"subset of {','.join(ALL_CASES)}")
    ap.add_argument(
        "--peer-venv",
        default=os.environ.get("VFLEET_PEER_VENV", "/work/race-venv"),
        help="venv holding ansible-core and pyinfra (env VFLEET_PEER_VENV)",
    )
    ap.add_argument(
        "--deploy-vars",
        type=Path,
        help="inventory whose all.vars a deploy uses (e.g. the "
        "demo's /var/lib/vfleet-lab/demo/deploy.yaml): adds vfleet_deploy_check",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(wanted) - set(ALL_CASES))
    if unknown:
        raise SystemExit(f"--cases: unknown {', '.join(unknown)}; pick from {', '.join(ALL_CASES)}")
    peer_bin = Path(args.peer_venv) / "bin"
    missing = [
        t
        for t, c in (("ansible", "ansible"), ("pyinfra", "pyinfra"))
        if any(w.startswith(c) for w in wanted) and not (peer_bin / t).exists()
    ]
    if missing:
        raise SystemExit(
            f"{', '.join(missing)} not in {peer_bin}; install: python3 -m venv {args.peer_venv} "
            f"&& {peer_bin}/pip install ansible-core pyinfra (or pass --peer-venv)"
        )
    from vfleet.lab import api

    before = mem_available()
    t0 = time.monotonic()
    inv = api.up(max(sizes), gateways=0, echo=lambda _l: None).inventory
    up_s = round(time.monotonic() - t0, 1)
    lab_vars, all_hosts = pinv.lab_hosts(inv)
    versions = {
        t: subprocess.run([str(peer_bin / t), "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        for t in ("ansible", "pyinfra")
        if (peer_bin / t).exists()
    }
    out = {
        "script": SCRIPT,
        "repeat": args.repeat,
        "versions": versions,
        "cpus": os.cpu_count(),
        "lab_up_s": up_s,
        "lab_mem_bytes": before - mem_available(),
        "vfleet_bytecode": "compiled before the race",
        "sizes": [],
    }
    byte_compile()
    with tempfile.TemporaryDirectory(prefix="peer-race-") as work:
        out["startup_s"] = startup(Path(work), peer_bin, args.repeat)
        print(f"  start-up (`true` on the controller): {out['startup_s']}", file=sys.stderr, flush=True)
        for n in sizes:
            forks = args.forks or n
            cases = build_cases(Path(work), n, forks, peer_bin, lab_vars, all_hosts[:n], wanted, args.deploy_vars)
            out["sizes"].append({"forks": forks, **race(n, cases, args.repeat)})
    return emit(out, args.out)


if __name__ == "__main__":
    sys.exit(main())
