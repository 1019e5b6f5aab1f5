"""One typed view of a host's configuration, built once from the validated inventory.

Why: every step used to re-read host variables with its own `vars.get(k) or default`, and
the copies drifted (two renderers with their own defaults, readiness looking for model_name
where vLLM serves served_model_name, the gateway URL built three ways). Here the defaults are
the schema's (vfleet/config/variables.py, already merged into the host's vars by the loader), and
every value derived from them (unit name, env-file path, venv and model paths, the served
name, URLs with IPv6 brackets, the vLLM command line) is computed in exactly one place.

Plain frozen dataclasses rather than pydantic: the values were already checked by the schema
(jsonschema, with messages naming the file and line), so a second validation layer would only
add a dependency and a second set of error messages.
"""

from __future__ import annotations

import ipaddress
import posixpath
from dataclasses import dataclass, field
from typing import Any, Mapping

from vfleet.config.gateway_access import GatewayAccessReader, GatewayTls, Tenant
from vfleet.config.lora import LoraAdapter, adapters_from_vars
from vfleet.config.monitoring import MonitoringSettings
from vfleet.config.replica_settings import ReplicaSettings
from vfleet.config.speculative import Speculative, speculative_from_vars
from vfleet.config.variables import GATEWAY_GROUP, VLLM_GROUP
from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory import Host

__all__ = ["HostConfig", "InstallSpec", "hostport"]

UNIT_DIR = "/etc/systemd/system"


def hostport(address: str, port: int) -> str:
    """`address:port` for a URL: IPv6 literals in brackets (RFC 3986), names as they are."""
    bare = address.strip("[]")
    try:
        if ipaddress.ip_address(bare).version == 6:
            return f"[{bare}]:{port}"
    except ValueError:
        pass
    return f"{address}:{port}"


@dataclass(frozen=True)
class InstallSpec:
    """What a venv is built from: equal specs mean an equal venv (its marker records it)."""

    package: str
    version: str
    pins: tuple[str, ...]
    remove: tuple[str, ...]
    python: str
    offline: bool
    site_packages: tuple[str, ...] = ()
    no_deps: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The marker's record; the newer keys only when set, so venvs verified before they
        existed stay trusted."""
        spec = {
            "package": self.package,
            "version": self.version,
            "pins": list(self.pins),
            "remove": list(self.remove),
            "python": self.python,
            "offline": self.offline,
        }
        if self.site_packages:
            spec["site_packages"] = list(self.site_packages)
        if self.no_deps:
            spec["no_deps"] = True
        return spec


@dataclass(frozen=True)
class HostConfig:
    """Everything vfleet's roles read about one host; no role reads host vars directly."""

    name: str
    address: str
    groups: tuple[str, ...]
    # install
    vllm_package: str
    vllm_version: str | None
    vllm_python: str
    vllm_root: str
    vllm_wheelhouse: str | None
    vllm_extra_pins: tuple[str, ...]
    vllm_remove_packages: tuple[str, ...]
    vllm_site_packages: tuple[str, ...]
    vllm_install_no_deps: bool
    vllm_installer: str  # auto, uv or pip; not in InstallSpec: a venv it made is the same venv
    venv_name: str | None
    install_timeout: int
    # service account and unit
    vllm_user: str
    vllm_group: str
    service_name: str
    env_file: str
    vllm_port: int
    vllm_host: str
    shutdown_timeout: int
    ready_timeout: int
    # model
    model_source: str | None
    model_revision: str | None
    model_name: str | None
    model_dir: str
    model_path: str | None
    served_model_name: str | None
    model_size_bytes: int | None
    # engine
    dtype: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int | None
    gpu_memory_utilization: float
    max_num_seqs: int | None
    kv_cache_memory_bytes: int | None
    max_num_batched_tokens: int | None
    enable_chunked_prefill: bool | None
    enable_prefix_caching: bool | None
    enforce_eager: bool
    quantization: str | None
    kv_cache_dtype: str
    swap_space: int | None
    disable_log_requests: bool
    block_size: int | None
    trust_remote_code: bool
    chat_template: str | None
    serve_completions_only: bool
    vllm_extra_args: tuple[str, ...]
    vllm_env: Mapping[str, str]
    vllm_allow_unsafe: tuple[str, ...]
    nccl_env: Mapping[str, str] | None
    cuda_visible_devices: str | tuple[int, ...] | None
    cpu_kvcache_space_gib: int | None
    # weights
    weights_fanout: bool
    weights_distribution: str
    weights_bwlimit: int | None
    weights_peer_ssh_key: str | None
    compile_cache_share: bool
    # gateway
    gateway_port: int
    gateway_listen_address: str | None
    gateway_rate_limit: str
    gateway_rate_burst: int
    gateway_client_max_body_size: str
    gateway_read_timeout: int
    gateway_max_fails: int
    gateway_fail_timeout: int
    # several models behind one gateway (vfleet/roles/gateway/_models.py)
    gateway_weight: int
    gateway_backup: bool
    gateway_max_tokens: int | None
    gateway_max_conns: int | None
    gateway_route_prefix: str | None
    # preflight
    preflight_smi_xml: bool
    # monitoring (the monitoring group's Prometheus and the alert thresholds)
    monitoring: MonitoringSettings
    # multi-host replicas and their Ray nodes (vfleet/config/replicas.py)
    replica: ReplicaSettings
    # who may use the gateway and how it is reached (vfleet/config/gateway_access.py); the
    # model's fallback when none of its hosts can take a request
    gateway_tenants: tuple[Tenant, ...] = ()
    gateway_tls: GatewayTls | None = None
    gateway_fallback_model: str | None = None
    # LoRA adapters served beside the model (vfleet/config/lora.py)
    lora_adapters: tuple[LoraAdapter, ...] = ()
    # speculative decoding (vfleet/config/speculative.py)
    speculative: Speculative | None = None
    # secrets: never in repr, so never in a log line or a traceback
    api_key: str | None = field(default=None, repr=False)
    hf_token: str | None = field(default=None, repr=False)
    # the variables the inventory (or --set) gives a value; the others hold the schema's default
    set_in_inventory: frozenset[str] = field(default=frozenset(), repr=False)

    # -- building ---------------------------------------------------------------------
    @classmethod
    def from_host(cls, host: Host, access: GatewayAccessReader | None = None) -> "HostConfig":
        """The config of a loaded (validated, defaults merged) inventory host.

        `access`: the run's reader of tenant keys and TLS files (the fleet model passes one, so
        each file is read once and every problem is reported together); without one, a
        problem raises InventoryError here."""
        v = host.vars
        reader = access or GatewayAccessReader()
        gateway = GATEWAY_GROUP in host.groups
        service_name = str(v["service_name"])
        model_name = v.get("model_name")
        model_path = v.get("model_path") or (posixpath.join(v["model_dir"], model_name) if model_name else None)
        cvd = v.get("cuda_visible_devices")
        served = v.get("served_model_name") or model_name
        config = cls(
            name=host.name,
            address=host.address,
            groups=tuple(host.groups),
            vllm_package=v["vllm_package"],
            vllm_version=None if v.get("vllm_version") is None else str(v["vllm_version"]),
            vllm_python=v["vllm_python"],
            vllm_root=v["vllm_root"],
            vllm_wheelhouse=v.get("vllm_wheelhouse"),
            vllm_extra_pins=tuple(v["vllm_extra_pins"]),
            vllm_remove_packages=tuple(v["vllm_remove_packages"]),
            vllm_site_packages=tuple(v["vllm_site_packages"]),
            vllm_install_no_deps=bool(v["vllm_install_no_deps"]),
            vllm_installer=str(v["vllm_installer"]),
            venv_name=v.get("vllm_venv_name"),
            install_timeout=int(v["install_timeout"]),
            vllm_user=v["vllm_user"],
            vllm_group=v["vllm_group"],
            service_name=service_name,
            env_file=v.get("vllm_env_file") or f"/etc/vllm/{service_name}.env",
            vllm_port=int(v["vllm_port"]),
            vllm_host=v["vllm_host"],
            shutdown_timeout=int(v["shutdown_timeout"]),
            ready_timeout=int(v["ready_timeout"]),
            model_source=v.get("model_source"),
            model_revision=v.get("model_revision"),
            model_name=model_name,
            model_dir=v["model_dir"],
            model_path=model_path,
            served_model_name=served,
            model_size_bytes=v.get("model_size_bytes"),
            dtype=v["dtype"],
            tensor_parallel_size=int(v["tensor_parallel_size"]),
            pipeline_parallel_size=int(v["pipeline_parallel_size"]),
            max_model_len=v.get("max_model_len"),
            gpu_memory_utilization=float(v["gpu_memory_utilization"]),
            max_num_seqs=v.get("max_num_seqs"),
            kv_cache_memory_bytes=v.get("kv_cache_memory_bytes"),
            max_num_batched_tokens=v.get("max_num_batched_tokens"),
            enable_chunked_prefill=v.get("enable_chunked_prefill"),
            enable_prefix_caching=v.get("enable_prefix_caching"),
            enforce_eager=bool(v["enforce_eager"]),
            quantization=v.get("quantization"),
            kv_cache_dtype=v["kv_cache_dtype"],
            swap_space=v.get("swap_space"),
            disable_log_requests=bool(v["disable_log_requests"]),
            block_size=v.get("block_size"),
            trust_remote_code=bool(v["trust_remote_code"]),
            chat_template=v.get("chat_template"),
            serve_completions_only=bool(v["serve_completions_only"]),
            vllm_extra_args=tuple(v["vllm_extra_args"]),
            vllm_env=dict(v["vllm_env"]),
            vllm_allow_unsafe=tuple(v["vllm_allow_unsafe"]),
            nccl_env=None if v.get("nccl_env") is None else dict(v["nccl_env"]),
            cuda_visible_devices=tuple(cvd) if isinstance(cvd, list) else cvd,
            cpu_kvcache_space_gib=v.get("cpu_kvcache_space_gib"),
            weights_fanout=bool(v["weights_fanout"]),
            weights_distribution=str(v["weights_distribution"]),
            weights_bwlimit=v.get("weights_bwlimit"),
            weights_peer_ssh_key=v.get("weights_peer_ssh_key"),
            compile_cache_share=bool(v["compile_cache_share"]),
            gateway_port=int(v["gateway_port"]),
            gateway_listen_address=v.get("gateway_listen_address"),
            gateway_rate_limit=v["gateway_rate_limit"],
            gateway_rate_burst=int(v["gateway_rate_burst"]),
            gateway_client_max_body_size=v["gateway_client_max_body_size"],
            gateway_read_timeout=int(v["gateway_read_timeout"]),
            gateway_max_fails=int(v["gateway_max_fails"]),
            gateway_fail_timeout=int(v["gateway_fail_timeout"]),
            gateway_weight=int(v["gateway_weight"]),
            gateway_backup=bool(v["gateway_backup"]),
            gateway_max_tokens=v.get("gateway_max_tokens"),
            gateway_max_conns=v.get("gateway_max_conns"),
            gateway_route_prefix=v.get("gateway_route_prefix"),
            gateway_tenants=reader.tenants(host) if gateway else (),
            gateway_tls=reader.tls(host) if gateway else None,
            gateway_fallback_model=reader.fallback_model(host, served),
            lora_adapters=adapters_from_vars(v.get("lora_adapters")),
            speculative=speculative_from_vars(v.get("speculative_decoding")),
            preflight_smi_xml=bool(v["preflight_smi_xml"]),
            monitoring=MonitoringSettings.from_vars(v),
            replica=ReplicaSettings.from_vars(v),
            api_key=v.get("api_key"),
            hf_token=v.get("hf_token"),
            set_in_inventory=frozenset(k for k, src in host.sources.items() if src != "default"),
        )
        if access is None:
            reader.raise_errors()
        return config

    # -- roles in the fleet -------------------------------------------------------------
    @property
    def serves(self) -> bool:
        return VLLM_GROUP in self.groups

    @property
    def is_gateway(self) -> bool:
        return GATEWAY_GROUP in self.groups

    def require_serving(self) -> None:
        """A host that serves needs a pinned version and a model: say so before connecting."""
        missing = [k for k, val in (("vllm_version", self.vllm_version), ("model_name", self.model_name)) if not val]
        if missing:
            raise VfleetError(
                f"host '{self.name}': {', '.join(missing)} not set in the inventory "
                f"(group {VLLM_GROUP}); see docs/variables.md"
            )

    # -- systemd ------------------------------------------------------------------------
    @property
    def unit(self) -> str:
        return f"{self.service_name}.service"

    @property
    def ray_unit(self) -> str:
        """The Ray member unit of a ray replica beside the service (the service's unit files
        name it too, so it is derived here, not in the replica role)."""
        return f"{self.service_name}-ray.service"

    @property
    def unit_path(self) -> str:
        return f"{UNIT_DIR}/{self.unit}"

    @property
    def state_dir(self) -> str:
        """StateDirectory= (and the service user's home): /var/lib/<service_name>."""
        return f"/var/lib/{self.service_name}"

    @property
    def cache_dir(self) -> str:
        """CacheDirectory= (XDG_CACHE_HOME of the service): /var/cache/<service_name>."""
        return f"/var/cache/{self.service_name}"

    @property
    def vllm_cache_root(self) -> str:
        """VLLM_CACHE_ROOT: where vLLM keeps its torch.compile cache (torch_compile_cache/).
        The compile-cache role copies that cache between hosts at this identical path."""
        return f"{self.cache_dir}/vllm"

    # -- LoRA adapters and the speculative draft -------------------------------------------
    def adapter_path(self, name: str) -> str:
        """The link vLLM reads an adapter from (--lora-modules NAME=PATH): beside the model,
        in model_dir's own lora/ folder (the name is a plain folder name, vfleet/config/lora.py)."""
        return posixpath.join(self.model_dir, "lora", name)

    @property
    def draft_path(self) -> str:
        """The link vLLM reads a speculative draft model from: one per service on a machine."""
        return posixpath.join(self.model_dir, "draft", self.service_name)

    # -- venvs ----------------------------------------------------------------------------
    @property
    def install_spec(self) -> InstallSpec:
        if not self.vllm_version:
            raise VfleetError(
                f"host '{self.name}': vllm_version is not set in the inventory; pin one (see `vfleet preflight`)"
            )
        return InstallSpec(
            self.vllm_package,
            self.vllm_version,
            self.vllm_extra_pins,
            self.vllm_remove_packages,
            self.vllm_python,
            bool(self.vllm_wheelhouse),
            self.vllm_site_packages,
            self.vllm_install_no_deps,
        )

    def venv_for(self, version: str) -> str:
        """The venv of a version (an upgrade installs the new one beside the running one)."""
        name = self.venv_name if (self.venv_name and version == self.vllm_version) else f"{self.vllm_package}-{version}"
        return posixpath.join(self.vllm_root, name)

    @property
    def venv_path(self) -> str:
        return self.venv_for(self.install_spec.version)

    @property
    def current_link(self) -> str:
        return posixpath.join(self.vllm_root, "current")

    @property
    def previous_link(self) -> str:
        return posixpath.join(self.vllm_root, "previous")

    @property
    def wheelhouse_dir(self) -> str:
        return posixpath.join(self.vllm_root, "wheelhouse")

    # -- URLs -----------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """vLLM on this host, as the controller reaches it."""
        return f"http://{hostport(self.address, self.vllm_port)}"

    @property
    def gateway_url(self) -> str:
        """nginx on this (gateway) host: https when it has TLS (then it has no plain listener)."""
        scheme = "https" if self.gateway_tls else "http"
        return f"{scheme}://{hostport(self.address, self.gateway_port)}"

    @property
    def gateway_verify(self) -> str | bool:
        """What vfleet's clients of gateway_url pass as httpx's verify=: the CA file the
        inventory names, else True (the system's CAs)."""
        return self.gateway_tls.ca_file if self.gateway_tls and self.gateway_tls.ca_file else True
