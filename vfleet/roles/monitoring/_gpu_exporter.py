"""GPU readings on a vLLM host: Debian's prometheus-node-exporter, its textfile collector fed
every INTERVAL by vfleet's producer (vfleet/roles/monitoring/_gpu_textfile.py, run by a systemd
timer), so Prometheus's `gpu` job sees each GPU's utilisation, memory and ECC errors and
whether nvidia-smi answered at all.

Why node_exporter + a textfile, not an exporter of its own: Debian bookworm ships no GPU
exporter (prometheus-node-exporter-collectors has no nvidia script), NVIDIA's DCGM exporter
and PyPI's NVML-based exporters need libnvidia-ml and the devices (which the lab's simulated
GPUs cannot give, and which would hide an nvidia-smi that fails), while nvidia-smi is on
every host with the driver. node_exporter is maintained, packaged, and serves the host's
CPU, memory and disks beside the GPUs; what vfleet adds is one short script and two units.

In pyinfra's shape, like vfleet/roles/monitoring/_exporter.py: `facts_for` says what to read,
`plan` turns the host's config and the facts into changes (or none: a second run changes
nothing), `configure` gathers, plans and applies."""

from __future__ import annotations

import posixpath
import shlex
from pathlib import Path
from typing import Any, Mapping

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.changes import Change, apply, command, daemon_reload, file_change, service_changes
from vfleet.engine.facts import CommandOk, Fact, FileFact, UnitFact, gather
from vfleet.engine.results import Status
from vfleet.engine.runner import HostContext
from vfleet.roles.monitoring._gpu_textfile import TEXTFILE_DIR, TEXTFILE_NAME
from vfleet.roles.monitoring._packaged import daemon_changes, refuse_masked
from vfleet.roles.monitoring._scrape import NODE_EXPORTER_PORT

__all__ = [
    "PACKAGE",
    "UNIT",
    "DEFAULTS_FILE",
    "SCRIPT",
    "SERVICE",
    "TIMER",
    "INTERVAL",
    "expected_gpus",
    "facts_for",
    "defaults_text",
    "service_text",
    "timer_text",
    "plan",
    "configure",
]

PACKAGE = "prometheus-node-exporter"
UNIT = f"{PACKAGE}.service"
DEFAULTS_FILE = f"/etc/default/{PACKAGE}"  # EnvironmentFile= of Debian's unit: ARGS
SCRIPT = "/usr/local/lib/vfleet/gpu-_metrics.py"
SERVICE = "vfleet-gpu-metrics.service"
TIMER = "vfleet-gpu-metrics.timer"
UNIT_DIR = "/etc/systemd/system"
INTERVAL = "15s"  # the default scrape interval: each scrape sees a fresh reading
SMI_TIMEOUT_S = 20  # nvidia-smi may hang on a lost GPU; the producer says so and exits
HEAD = "# Managed by vfleet (vfleet/roles/monitoring/_gpu_exporter.py): local edits are overwritten.\n"
_PRODUCER = Path(__file__).with_name("_gpu_textfile.py")


def expected_gpus(cfg: HostConfig) -> int:
    """GPUs the host must have for its service, from the inventory: TP x PP for a host that
    serves alone, replica_gpus_per_host for a member of a multi-host replica (1 when unset:
    its share is a fact of the whole replica), and at least the highest GPU index named by
    cuda_visible_devices plus one (`4,5` means a host with 6 or more)."""
    share = (
        (cfg.replica.gpus_per_host or 1) if cfg.replica.name else cfg.tensor_parallel_size * cfg.pipeline_parallel_size
    )
    cvd = cfg.cuda_visible_devices
    if cvd is None:
        return share
    indices = cvd if isinstance(cvd, tuple) else tuple(int(x) for x in cvd.split(","))
    return max(share, max(indices) + 1)


def defaults_text() -> str:
    """ARGS: the port Prometheus's `gpu` job scrapes, the textfile folder the producer writes."""
    args = f"--web.listen-address=:{NODE_EXPORTER_PORT} --collector.textfile.directory={TEXTFILE_DIR}"
    return f"{HEAD}ARGS={shlex.quote(args)}\n"


def service_text(cfg: HostConfig) -> str:
    """One run of the producer; the count it compares with is this host's expected_gpus."""
    output = posixpath.join(TEXTFILE_DIR, TEXTFILE_NAME)
    return (
        f"{HEAD}[Unit]\nDescription=GPU readings from nvidia-smi for prometheus-node-exporter (vfleet)\n"
        f"After={UNIT}\n\n[Service]\nType=oneshot\n"
        f"ExecStart=/usr/bin/python3 {SCRIPT} --expected {expected_gpus(cfg)} --output {output} "
        f"--timeout {SMI_TIMEOUT_S}\nTimeoutStartSec={SMI_TIMEOUT_S * 3}\n"
    )


def timer_text() -> str:
    """At once when started (deploy, boot), then every INTERVAL after the last run."""
    return (
        f"{HEAD}[Unit]\nDescription=Refresh vfleet's GPU readings every {INTERVAL}\n\n"
        f"[Timer]\nOnActiveSec=1s\nOnUnitActiveSec={INTERVAL}\nAccuracySec=1s\n\n"
        "[Install]\nWantedBy=timers.target\n"
    )


def facts_for(*, diff: bool = False) -> dict[str, Fact]:
    return {
        "exporter": CommandOk(f"command -v {PACKAGE}"),
        "unit": UnitFact(UNIT),
        "timer": UnitFact(TIMER),
        "defaults": FileFact(DEFAULTS_FILE, with_content=diff),
        "script": FileFact(SCRIPT, with_content=diff),
        "service_file": FileFact(posixpath.join(UNIT_DIR, SERVICE), with_content=diff),
        "timer_file": FileFact(posixpath.join(UNIT_DIR, TIMER), with_content=diff),
    }


def plan(cfg: HostConfig, facts: Mapping[str, Any]) -> list[Change]:
    """Changes that make this host serve its GPU readings; [] when it already does. The
    package first (it creates the textfile folder), then the producer and its units, a
    daemon-reload if a unit changed, the timer enabled and started, and one run at once when
    the producer changed under a running timer (a new expected count shows without waiting)."""
    refuse_masked(UNIT, facts["unit"])
    refuse_masked(TIMER, facts["timer"])
    args = file_change(
        DEFAULTS_FILE,
        defaults_text(),
        facts["defaults"],
        mode="0644",
        owner="root",
        group="root",
        action="node exporter args",
    )
    changes = daemon_changes(
        PACKAGE, UNIT, facts["unit"], fresh=not facts["exporter"], args=args, restart_why="new install or ARGS"
    )
    script = file_change(
        SCRIPT, _PRODUCER.read_text(), facts["script"], mode="0755", owner="root", group="root", action="gpu producer"
    )
    units = [
        *file_change(
            posixpath.join(UNIT_DIR, SERVICE),
            service_text(cfg),
            facts["service_file"],
            mode="0644",
            owner="root",
            group="root",
            action="gpu producer unit",
        ),
        *file_change(
            posixpath.join(UNIT_DIR, TIMER),
            timer_text(),
            facts["timer_file"],
            mode="0644",
            owner="root",
            group="root",
            action="gpu producer unit",
        ),
    ]
    changes += [*script, *units, *([daemon_reload()] if units else [])]
    changes += service_changes(TIMER, facts["timer"], enabled=True, started=True)
    if (script or units) and facts["timer"].active == "active":
        changes.append(command("service", SERVICE, "run once (producer changed)", f"systemctl start {SERVICE}"))
    return changes


def configure(ctx: HostContext) -> None:
    """Step body for a vLLM host of a monitored fleet."""
    changes = plan(ctx.config, gather(ctx, facts_for(diff=ctx.diff)))
    if not changes:
        ctx.record("gpu exporter", SERVICE, Status.OK)
    apply(ctx, changes)
