"""The triage classes: what an operator is shown, and the fixed next step for each.

Why a table: the field reports follow fixed chains of reasoning (issue 27); writing each chain
down once, with the inventory variables it turns, keeps the CLI, the rollout's failure line and
the docs (docs/triage.md) saying the same thing. The ids and titles are shown to operators and
kept stable; `hint` is the short form that fits on a rollout's one-line failure message."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TriageClass", "CLASSES", "by_id"]


@dataclass(frozen=True)
class TriageClass:
    id: str
    title: str
    next_step: str
    hint: str


CLASSES: tuple[TriageClass, ...] = (
    TriageClass(
        "oom-loading",
        "out of memory while loading weights",
        "The weights do not fit in the GPUs' memory. Raise tensor_parallel_size (more GPUs share the "
        "weights) or serve a quantized model (quantization, with a quantized model_source). Lowering "
        "gpu_memory_utilization or max_model_len does not help here: the weights come first.",
        "more tensor parallel (tensor_parallel_size) or a quantized model (quantization)",
    ),
    TriageClass(
        "oom-after-loading",
        "out of memory after loading (KV cache allocation or CUDA graph capture)",
        "The weights fit; the memory ran out after them. Change one variable at a time, in this order: "
        "1. lower gpu_memory_utilization by 0.02-0.05 (e.g. 0.90 -> 0.87) and deploy; "
        "2. only if it still fails, put gpu_memory_utilization back and lower max_model_len.",
        "lower gpu_memory_utilization by 0.02-0.05 first, then max_model_len; one at a time",
    ),
    TriageClass(
        "kv-cache-too-small",
        "KV cache too small for max_model_len",
        "vLLM started, measured the memory left for the KV cache, and refused: one sequence of "
        "max_model_len tokens does not fit. Change one variable at a time, in this order: "
        "1. lower max_model_len (to the estimate vLLM printed, when it printed one); "
        "2. or raise gpu_memory_utilization by 0.02-0.05 if nothing else uses the GPUs; "
        "no memory at all left for the cache: raise tensor_parallel_size or quantize.",
        "lower max_model_len first, or raise gpu_memory_utilization by 0.02-0.05",
    ),
    TriageClass(
        "oom-phase-unknown",
        "out of memory (before or after loading: not in the lines read)",
        "The lines read do not say whether the weights had loaded. Look earlier in the journal for "
        "'Model loading took' (journalctl -u UNIT -n 2000 --no-pager -o cat): present before the "
        "out-of-memory line -> out of memory after loading (lower gpu_memory_utilization by 0.02-0.05 "
        "first, then max_model_len); absent -> while loading weights (more tensor parallel or quantization).",
        "find 'Model loading took' earlier in the journal to tell loading from after loading",
    ),
    TriageClass(
        "nccl",
        "NCCL init hangs or NCCL errors",
        "Check, in this order: the GPUs' topology (nvidia-smi topo -m; vfleet preflight reports it); "
        "NCCL_P2P_DISABLE / NCCL_IB_DISABLE left by someone's script (the unit's environment, "
        "~/.nccl.conf, NCCL_CONF_FILE, a unit drop-in; vfleet's own settings are nccl_env); /dev/shm "
        "too small (df -h /dev/shm); driver versions apart between GPUs or hosts (nvidia-smi). "
        "Then set NCCL_DEBUG=INFO in nccl_env and read where it stops.",
        "check topology, NCCL_P2P_DISABLE/NCCL_IB_DISABLE, /dev/shm size, driver versions",
    ),
    TriageClass(
        "chat-template",
        "chat template error",
        "The tokenizer has no usable chat template, or the one given fails to load or render. Point "
        "chat_template at a Jinja file on the host that matches the model, or set "
        "serve_completions_only: true for a base model without one.",
        "set chat_template to a Jinja file that matches the model, or serve_completions_only",
    ),
    TriageClass(
        "port-in-use",
        "port already in use",
        "Another process holds the port. On the host, `ss -ltnp` names it: a vLLM left from an "
        "earlier start, or another service. Stop it, or give this host another vllm_port. A port of "
        "torch.distributed's rendezvous (TCPStore, get_open_port) is vLLM's own: an old vLLM process "
        "still running is the usual holder.",
        "find the holder with `ss -ltnp`; stop it or change vllm_port",
    ),
    TriageClass(
        "no-kernel",
        "no kernel for this GPU (compute capability not supported)",
        "This vLLM / PyTorch build has no kernels for the GPU's compute capability. Pin a vLLM "
        "version whose wheels support it (vllm_version; vfleet preflight checks versions against the "
        "GPUs), or, for bfloat16 on a GPU below compute capability 8.0, set dtype: float16.",
        "pin a vllm_version built for this GPU, or dtype: float16 below compute capability 8.0",
    ),
    TriageClass(
        "unknown",
        "unknown: no known signal in the lines read",
        "None of the known signals is in the lines read. Read the lines shown (the last error-looking "
        "ones); if the log was cut, read more of it (journalctl -u UNIT -n 2000 --no-pager -o cat).",
        "no known signal; read the journal",
    ),
)

_BY_ID = {c.id: c for c in CLASSES}


def by_id(class_id: str) -> TriageClass:
    return _BY_ID[class_id]
