"""Render what a member of a multi-host replica runs (pure, no SSH): the Ray head or worker
unit and its environment, the head's vLLM unit (drop-in included) or, for the mp backend,
each member's vLLM unit with its node rank.

    files = render_member(replica, cfg, head_cfg, flag_available, route=Route(...), systemd_version=252)

Why the vLLM unit is the single-host renderer's (vfleet/roles/service/_render.py) with a changed
config rather than a second template: one command-line builder, so a replica's head gets the
same version-aware flags, quoting and secret handling as every other host; the replica only
adds `--distributed-executor-backend ray` (or `--nnodes/--node-rank/--master-addr`,
`--headless` on workers) and the network environment. That environment comes from the route
to the head (a fact, vfleet/roles/replica/_facts.py; the head routes to its first worker): the
interface for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME and the address for VLLM_HOST_IP.
Without the fact (`vfleet render`) the address is the inventory's and the interface is
`replica_nic` or left to NCCL's own choice.

How the head's address meets a port, per program (an IPv6 head is written bare in the
inventory, vfleet/config/addresses.py):
- Ray's `--address` and RAY_ADDRESS take HOST:PORT, an IPv6 host in brackets: Ray's
  ParseAddress (src/ray/util/network_util.cc) refuses an unbracketed IPv6 host ("Invalid IPv6
  (missing brackets)"), and its BuildAddress writes `[host]:port`. So: hostconfig.hostport.
- `--node-ip-address` and VLLM_HOST_IP are a bare address (no port).
- vLLM's `--master-addr` is a bare address beside `--master-port`: vLLM joins them itself,
  bracketing an IPv6 one (vllm/utils/network_utils.py get_tcp_uri: `tcp://[ip]:port` when
  is_valid_ipv6_address(ip), which a bracketed string is not).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import UNIT_DIR, HostConfig, hostport
from vfleet.config.quoting import QuotingError, systemd_quote
from vfleet.config.replicas import Replica
from vfleet.roles.replica._facts import Route
from vfleet.roles.service import FlagCheck, RenderError, exec_lines, render_service
from vfleet.templates.environment import environment

__all__ = ["MemberFile", "MemberNet", "member_net", "render_member", "ray_argv", "ray_address"]

RESTART_SEC = 5
GRACE_PERIOD_SEC = 30
STOP_TIMEOUT_SEC = 60


@dataclass(frozen=True)
class MemberFile:
    path: str
    mode: str
    text: str


@dataclass(frozen=True)
class MemberNet:
    """Where a member talks to the others: its address there and the interface (None: unknown)."""

    host_ip: str | None
    ifname: str | None

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.host_ip:
            out["VLLM_HOST_IP"] = self.host_ip
        if self.ifname:
            out["NCCL_SOCKET_IFNAME"] = self.ifname
            out["GLOO_SOCKET_IFNAME"] = self.ifname
        return out


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address.strip("[]"))
        return True
    except ValueError:
        return False


def member_net(cfg: HostConfig, route: Route | None) -> MemberNet:
    """The inventory's replica_nic beats the route's interface; the route's src beats the address."""
    ip = route.src if route and route.src else (cfg.address if _is_ip(cfg.address) else None)
    nic = cfg.replica.nic or (route.dev if route and route.dev and route.dev != "lo" else None)
    return MemberNet(ip, nic)


def _ray_env_path(cfg: HostConfig) -> str:
    return f"/etc/vllm/{cfg.service_name}-ray.env"


def ray_address(head: HostConfig, port: int) -> str:
    """The head's GCS as Ray parses HOST:PORT: an IPv6 head in brackets (see the module's docstring)."""
    return hostport(head.address, port)


def ray_argv(cfg: HostConfig, replica: Replica, head: HostConfig, net: MemberNet) -> list[str]:
    """`ray start --block` for the head or a worker, every port pinned so the members' firewall
    can open exactly these (Ray picks random ones otherwise)."""
    ray = f"{cfg.vllm_root}/current/bin/ray"
    ports = cfg.replica.ray
    is_head = cfg.name == replica.head
    words = [ray, "start", "--block"]
    words += (
        ["--head", f"--port={ports.port}", "--include-dashboard=false"]
        if is_head
        else [f"--address={ray_address(head, ports.port)}"]
    )
    if net.host_ip:
        words.append(f"--node-ip-address={net.host_ip}")
    words += [
        f"--node-manager-port={ports.node_manager_port}",
        f"--object-manager-port={ports.object_manager_port}",
        f"--min-worker-port={ports.min_worker_port}",
        f"--max-worker-port={ports.max_worker_port}",
        f"--num-gpus={replica.gpus_per_host}",
        "--disable-usage-stats",
    ]
    return words


def _lines(argv: list[str]) -> list[list[str]]:
    return [argv[:3]] + [[w] for w in argv[3:]]


def _template(name: str, **ctx: Any) -> str:
    try:
        return environment().get_template(name).render(**ctx)
    except QuotingError as e:
        raise RenderError(str(e)) from None


def _ray_files(cfg: HostConfig, replica: Replica, head: HostConfig, net: MemberNet) -> list[MemberFile]:
    if cfg.replica.ray.min_worker_port > cfg.replica.ray.max_worker_port:
        raise RenderError("ray_min_worker_port is above ray_max_worker_port")
    role = "head" if cfg.name == replica.head else "worker"
    env = [(k, v) for k, v in net.env().items()]
    unit = _template(
        "ray-node.service.j2",
        role=role,
        replica=replica.name,
        ray_version=cfg.replica.ray.version,
        vllm_unit=cfg.unit,
        vllm_user=cfg.vllm_user,
        vllm_group=cfg.vllm_group,
        service_name=cfg.service_name,
        state_dir=cfg.state_dir,
        env_file=_ray_env_path(cfg),
        exec_lines=_lines(ray_argv(cfg, replica, head, net)),
        ray_bin=f"{cfg.vllm_root}/current/bin/ray",
        grace_period=GRACE_PERIOD_SEC,
        timeout_stop_sec=STOP_TIMEOUT_SEC,
        restart_sec=RESTART_SEC,
    )
    return [
        MemberFile(f"{UNIT_DIR}/{cfg.ray_unit}", "0644", unit),
        MemberFile(_ray_env_path(cfg), "0600", _template("ray.env.j2", env_items=env)),
    ]


def _vllm_config(cfg: HostConfig, replica: Replica, head: HostConfig, net: MemberNet) -> HostConfig:
    """The member's HostConfig with the replica's flags and environment added."""
    env = {**net.env(), **cfg.vllm_env}
    if replica.backend == "ray":
        extra = ("--distributed-executor-backend", "ray")
        env["RAY_ADDRESS"] = ray_address(head, cfg.replica.ray.port)
    else:
        extra = (
            "--distributed-executor-backend",
            "mp",
            "--nnodes",
            str(len(replica.members)),
            "--node-rank",
            str(replica.node_rank(cfg.name)),
            "--master-addr",
            head.address.strip("[]"),
            "--master-port",
            str(cfg.replica.master_port),
        )
        if cfg.name != replica.head:
            extra += ("--headless",)
    return dataclasses.replace(cfg, vllm_extra_args=extra + cfg.vllm_extra_args, vllm_env=env)


def _headless_start(cfg: HostConfig, unit: str) -> str:
    """An mp worker's ExecStart must be `vllm serve ... --headless` (the module entry point
    ignores --headless); builds without a working `vllm` script get the facts' launcher."""
    words = vllm_facts.entrypoint(cfg.vllm_version, str(cfg.model_path), package=cfg.vllm_package)
    if words[:2] == ["bin/vllm", "serve"]:
        return unit
    row = next(
        (r for r in vllm_facts.data()["multinode"].get("headless_launchers", []) if r["package"] == cfg.vllm_package),
        None,
    )
    if row is None:
        raise RenderError(
            f"{cfg.vllm_package} {cfg.vllm_version}: no way known to start a headless "
            "worker (vllm serve --headless); use replica_backend: ray"
        )
    venv = f"{cfg.vllm_root}/current"
    old = exec_lines([f"{venv}/{w}" if w.startswith("bin/") else w for w in words])[:2]
    new = [f"{venv}/{w}" if w.startswith("bin/") else (str(cfg.model_path) if w == "MODEL" else w) for w in row["argv"]]

    def spell(ws: list[str]) -> str:
        return " ".join(systemd_quote(w) for w in ws)

    before = f"ExecStart={spell(old[0])} \\\n    {spell(old[1])}"
    if before not in unit:
        raise RenderError("the worker's start command is not where it was expected in the unit")
    return unit.replace(before, f"ExecStart={spell(new[:3])} \\\n    {spell(new[3:])}", 1)


def render_member(
    replica: Replica,
    cfg: HostConfig,
    head: HostConfig,
    flag_available: FlagCheck,
    *,
    route: Route | None = None,
    systemd_version: int | None = None,
) -> list[MemberFile]:
    """Files deploy writes on one member: `cfg` its config, `head` its replica's head's (the
    renderer passes configs whose secrets are masked)."""
    host = cfg.name
    net = member_net(cfg, route)
    out: list[MemberFile] = []
    if replica.backend == "ray":
        out += _ray_files(cfg, replica, head, net)
        if host != replica.head:
            return out
    vcfg = _vllm_config(cfg, replica, head, net)
    r = render_service(vcfg, flag_available, systemd_version=systemd_version)
    unit = r.unit_text if host == replica.head else _headless_start(vcfg, r.unit_text)
    out += [MemberFile(r.unit_path, "0644", unit), MemberFile(r.env_path, "0600", r.env_text)]
    if replica.backend == "ray":
        out.append(
            MemberFile(
                f"{UNIT_DIR}/{cfg.unit}.d/10-replica.conf",
                "0644",
                _template("vllm-replica.conf.j2", ray_unit=cfg.ray_unit),
            )
        )
    return out
