"""What a deploy would write on each host, rendered without connecting (like `helm template`).

Why: operators review the exact unit, env file and nginx config before a deploy, and tests
and reviewers read them the same way. The renderers are the ones deploy uses; only what
cannot be known without the host is left to its default: the NCCL decision of preflight
(only the inventory's nccl_env is rendered) and RestartSteps= (given systemd_version).
Secrets are masked: the file shows that a key is set, never what it is."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from vfleet.roles.gateway.render import GATEWAY_CONF_PATH, Backend, render_gateway
from vfleet.config.fleet import Fleet
from vfleet.config.hostconfig import HostConfig
from vfleet.roles.replica.ray_render import render_member
from vfleet.roles.service.render import render_service
from vfleet.config.variables import GATEWAY_GROUP, VLLM_GROUP
from vfleet.config.vllm_facts import flag_available

__all__ = ["RenderedFile", "render_host", "MASK"]

MASK = "********"


@dataclass(frozen=True)
class RenderedFile:
    path: str          # where deploy puts it on the host
    mode: str
    text: str


def masked(cfg: HostConfig) -> HostConfig:
    """The config with every secret replaced by MASK (also vllm_env values named like one)."""
    from vfleet.engine.inventory import masked_vars
    from vfleet.config.variables import SCHEMA

    env = masked_vars(dict(cfg.vllm_env), schema=SCHEMA)
    env = {k: (MASK if v == "***" else v) for k, v in env.items()}
    return dataclasses.replace(cfg, api_key=MASK if cfg.api_key else None,
                               hf_token=MASK if cfg.hf_token else None, vllm_env=env)


def render_host(fleet: Fleet, host: str, *, systemd_version: int | None = None) -> list[RenderedFile]:
    """Files deploy would write on this host (a vLLM host, a gateway, or both)."""
    out: list[RenderedFile] = []
    cfg = fleet.config(host)
    replica = fleet.replica_of(host)
    if replica is not None:  # a multi-host replica's member: Ray units, the head's vLLM (vfleet/roles/replica/ray_render.py)
        cfg.require_serving()
        out += [RenderedFile(f.path, f.mode, f.text) for f in render_member(
            replica, masked(cfg), masked(fleet.config(replica.head)), flag_available,
            systemd_version=systemd_version)]
    elif VLLM_GROUP in cfg.groups:
        cfg.require_serving()
        r = render_service(masked(cfg), flag_available, systemd_version=systemd_version)
        out += [RenderedFile(r.unit_path, "0644", r.unit_text), RenderedFile(r.env_path, "0600", r.env_text)]
    if GATEWAY_GROUP in cfg.groups:
        backends = [Backend.of(fleet.config(h)) for h in fleet.serving_hosts]
        out.append(RenderedFile(GATEWAY_CONF_PATH, "0644", render_gateway(backends, cfg)))
    return out
