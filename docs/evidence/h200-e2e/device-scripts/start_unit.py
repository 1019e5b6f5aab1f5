"""Start a vfleet-rendered vLLM unit by hand where there is no systemd (the device), the way
systemd would: the unit's Environment= and EnvironmentFile=, its WorkingDirectory, State- and
CacheDirectory created, ExecStart in a session of its own; wait until /health answers.
Differences from systemd, on purpose: it runs as root (User= is ignored: no vllm user there),
no cgroup, no restart policy.

    python3 start_unit.py RENDER_DIR/HOST LOG PIDFILE [--wait 300] [--port 8000]
    python3 start_unit.py --stop PIDFILE [--timeout 60]
"""
import argparse, os, shlex, signal, subprocess, sys, time, urllib.request


def service_section(text: str) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    section, line_acc = None, ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            line_acc += raw.rstrip()[:-1] + " "
            continue
        line, line_acc = line_acc + raw, ""
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service" and "=" in line:
            k, v = line.split("=", 1)
            keys.setdefault(k, []).append(v)
    return keys


def start(root: str, log: str, pidfile: str, wait: int, port: int) -> int:
    unit = service_section(open(os.path.join(root, "etc/systemd/system/vllm.service")).read())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    for item in unit.get("Environment", []):
        for word in shlex.split(item):
            k, v = word.split("=", 1)
            env[k] = v
    for path in unit.get("EnvironmentFile", []):
        local = os.path.join(root, path.lstrip("-/"))
        for line in open(local).read().splitlines():
            if line.strip() and not line.startswith("#"):
                k, v = line.split("=", 1)
                env[k] = shlex.split(v)[0] if v else ""
    for key, base in (("StateDirectory", "/var/lib"), ("CacheDirectory", "/var/cache")):
        for name in unit.get(key, []):
            os.makedirs(os.path.join(base, name), exist_ok=True)
    cwd = unit.get("WorkingDirectory", ["/"])[0]
    argv = [w.replace("%%", "%") for w in shlex.split(unit["ExecStart"][0])]
    print("ExecStart:", shlex.join(argv), flush=True)
    out = open(log, "w")
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    open(pidfile, "w").write(str(p.pid))
    t0 = time.time()
    while time.time() - t0 < wait:
        if p.poll() is not None:
            print(f"exited {p.returncode} after {time.time() - t0:.0f}s", flush=True)
            return 1
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                print(f"ready after {time.time() - t0:.0f}s (pid {p.pid})", flush=True)
                return 0
        except OSError:
            pass
        time.sleep(1)
    print(f"not ready after {wait}s", flush=True)
    return 1


def stop(pidfile: str, timeout: int) -> int:
    pid = int(open(pidfile).read())
    os.killpg(pid, signal.SIGTERM)          # KillMode=mixed: SIGTERM to the main process...
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            print(f"stopped after {time.time() - t0:.1f}s", flush=True)
            return 0
        time.sleep(0.5)
    os.killpg(pid, signal.SIGKILL)          # ...then SIGKILL to what is left (TimeoutStopSec)
    print(f"killed after {timeout}s", flush=True)
    return 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("args", nargs="*")
    ap.add_argument("--stop")
    ap.add_argument("--wait", type=int, default=300)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--timeout", type=int, default=60)
    a = ap.parse_args()
    sys.exit(stop(a.stop, a.timeout) if a.stop else start(*a.args, a.wait, a.port))
