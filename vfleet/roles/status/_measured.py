"""What a vLLM host runs, read live for the `measured` record of a bench or eval run
(vfleet/clients/measured.py): one round trip per host, on the status probes' protocol.

From the host: the installed vLLM version (the current venv's install marker, status's probe),
the copy of the weights the model link points at (status's probe), the running server's argv
and its GPUs (model, count, memory used). From the inventory: model, dtype, quantization and
KV cache dtype, as HostConfig resolves them. From the capacity planner: the memory the plan
gives this host (weights + KV cache over its tensor-parallel GPUs), when the model's files are
readable on the controller.

Why the argv of the running process (/proc/<MainPID>/cmdline) and not the rendered unit: a unit
changed but not restarted serves the old command line, and the record must say what was
measured. vfleet never puts the API key on a command line (it lives in the 0600 environment
file; extra_args refuses --api-key), but a unit edited by hand could: any --api-key value is
masked, and every argument goes through the run's redactor (vfleet/engine/redact.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from vfleet.clients import measured
from vfleet.config.hostconfig import HostConfig
from vfleet.config.quoting import shell_quote as q
from vfleet.engine import redact
from vfleet.engine.runner import HostContext, Play
from vfleet.roles.preflight import capacity, parse_rows, with_adapters
from vfleet.roles.status._collect import ask
from vfleet.roles.status._drift import controller_manifest_id
from vfleet.roles.status._parsers import weights_version
from vfleet.roles.status._probes import Probe, vllm_probes
from vfleet.roles.weights import copy_name

__all__ = [
    "GPU_FIELDS",
    "host_record",
    "measured_probes",
    "parse_argv",
    "gpu_rows",
    "planned_weights_gib",
    "record_of",
    "served_quantization",
    "measured_records",
    "common_record",
]

# name last: parse_rows lets the last column keep a comma a GPU name might hold
GPU_FIELDS = ["index", "memory.used", "memory.total", "name"]
SECRET_FLAGS = ("--api-key",)


def parse_argv(text: str) -> list[str] | None:
    """The process's arguments (cmdline with NULs turned to newlines), secrets masked."""
    args = text.split("\n")
    if args and args[-1] == "":
        args.pop()
    if not args:
        return None
    out: list[str] = []
    hide_next = False
    for arg in args:
        flag, eq, _ = arg.partition("=")
        if hide_next:
            arg = redact.MASK
        elif eq and flag in SECRET_FLAGS:
            arg = f"{flag}={redact.MASK}"
        hide_next = arg in SECRET_FLAGS
        out.append(redact.current().text(arg))
    return out


def gpu_rows(text: str) -> list[dict[str, str | None]]:
    return parse_rows(text, GPU_FIELDS)


def measured_probes(cfg: HostConfig) -> dict[str, Probe]:
    """Status's install and weights probes, the main process's argv, the GPUs."""
    status = vllm_probes(cfg)
    argv = (
        f"pid=$(systemctl show -p MainPID --value -- {q(cfg.unit)}); "
        "[ \"${pid:-0}\" -gt 0 ] && tr '\\000' '\\n' < \"/proc/$pid/cmdline\""
    )
    return {
        "install": status["install"],
        "weights": status["weights"],
        "argv": Probe(argv, parse_argv),
        "gpus": Probe(f"nvidia-smi --query-gpu={','.join(GPU_FIELDS)} --format=csv,noheader,nounits", gpu_rows),
    }


def _number(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def planned_weights_gib(cfg: HostConfig, gpu_memory_mib: float | None) -> float | None:
    """The weights the capacity plan counts for this host over its tensor-parallel GPUs, in GiB
    (what a dtype or quantization changes; the KV cache takes whatever the budget leaves, so
    weights + KV is the same for every variant), LoRA slots and a speculative draft's weights
    included, as vLLM's own "model weights" figure includes them; None when the model's
    config.json is not on the controller or the GPU size is unknown."""
    folder = Path(str(cfg.model_source or "")).expanduser()
    if not cfg.model_source or not gpu_memory_mib or not (folder / "config.json").is_file():
        return None
    facts = with_adapters(
        {
            "model_config": capacity.load_config(folder),
            "weights_bytes": capacity.weights_bytes_from_dir(folder),
            "gpus": [{"memory_total_mib": int(gpu_memory_mib)}],
        },
        cfg,
    )
    plan = capacity.plan_for_host(cfg, facts)
    if plan is None:
        return None
    per_gpu = plan.weights_bytes_per_gpu + plan.lora_bytes_per_gpu + plan.draft_weights_bytes_per_gpu
    return round(per_gpu * plan.tensor_parallel_size / 2**30, 2)


def served_quantization(cfg: HostConfig) -> str | None:
    """The quantization the engine applies: the inventory's `quantization`, else the method a
    quantized checkpoint names in its config.json, else "none" when that config is readable on
    the controller and names none (so bf16 -> fp8 is a change bench.compare and eval.compare
    report, not a field known on one side only); None when nothing says."""
    if cfg.quantization:
        return str(cfg.quantization)
    folder = Path(str(cfg.model_source or "")).expanduser()
    if not cfg.model_source or not (folder / "config.json").is_file():
        return None
    try:
        qc = capacity.load_config(folder).get("quantization_config")
    except (OSError, ValueError):
        return None
    return str(qc.get("quant_method") or "unknown") if isinstance(qc, dict) else "none"


def record_of(cfg: HostConfig, got: Mapping[str, Any]) -> dict[str, Any]:
    """The measured record of one host from its parsed answers (None where a probe had none)."""
    gpus = got.get("gpus") or []
    used = [_number(g.get("memory.used")) for g in gpus]
    totals = [t for t in (_number(g.get("memory.total")) for g in gpus) if t]
    names = sorted({str(g["name"]) for g in gpus if g.get("name")})
    copy = weights_version(got.get("weights"))
    if copy is None and cfg.model_source:
        manifest = controller_manifest_id(str(cfg.model_source))
        copy = copy_name(cfg, manifest) if manifest else None
    return measured.record(
        vllm_version=(got.get("install") or {}).get("vllm_version"),
        vllm_argv=got.get("argv"),
        model=cfg.model_name,
        weights_version=copy,
        dtype=cfg.dtype,
        quantization=served_quantization(cfg),
        kv_cache_dtype=cfg.kv_cache_dtype,
        gpu_model=", ".join(names) or None,
        gpu_count=len(gpus) or None,
        gpu_memory_used_mib=sum(u for u in used if u is not None) if used and None not in used else None,
        planned_weights_gib=planned_weights_gib(cfg, min(totals) if totals else None),
    )


def host_record(ctx: HostContext) -> dict[str, Any]:
    """One host's measured record, one round trip, inside a step already running on it (the
    rollout gate measures a canary in its own steps)."""
    return record_of(ctx.config, ask(ctx, measured_probes(ctx.config)))


def measured_records(play: Play, hosts: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each vLLM host's measured record, all hosts at once (--forks); a host that could not
    be asked has none (the play's result says why)."""
    return play.run_step("measured", host_record, hosts=list(hosts))


def common_record(records: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The fields every host's record has with one value, and each host's own record under
    "hosts": a run through a gateway measured all of them, and differences() still compares
    the shared setup at the top level."""
    shared: dict[str, Any] = {}
    if records:
        first, *rest = records.values()
        shared = {k: v for k, v in first.items() if all(r.get(k) == v for r in rest)}
    return {**shared, "hosts": {name: dict(r) for name, r in records.items()}}
