"""Checks on the model folder before anything starts: the pitfalls that make a deployment look
"broken" only once it serves (issue 12, after the Yuan2.0 report): no chat template, custom code
without trust_remote_code, a checkpoint quantisation the GPU or the inventory contradicts, and a
max_model_len beyond what config.json allows.

Pure functions of (the host's HostConfig, facts); facts carry `model_config`, `model_files` and `tokenizer_config`
(_model_facts.py) from the host's model directory or the controller's model_source folder. Each
returns None when the facts needed are absent (nothing to say yet, e.g. weights not synced).
"""

from __future__ import annotations

from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.hostconfig import HostConfig

from ._adapter_checks import check_adapters
from ._check_base import FAIL, PASS, WARN, Check
from ._model_facts import TEMPLATE_FILES, custom_code_files
from ._speculative_checks import check_speculative

# Inventory quantisation values vLLM accepts for a checkpoint of each quant_method (the Marlin
# variants are the fast kernels of the same format; vLLM picks them itself on CC >= 8.0).
COMPATIBLE_QUANT = {
    "awq": {"awq", "awq_marlin", "marlin"},
    "gptq": {"gptq", "gptq_marlin", "marlin"},
    "fp8": {"fp8"},
    "bitsandbytes": {"bitsandbytes"},
    "compressed-tensors": {"compressed-tensors"},
}
# rope_scaling types whose factor vLLM does not multiply into the derived max length (the config's
# max_position_embeddings already counts it); vllm/config.py _get_and_verify_max_len.
NO_SCALE_ROPE = {"su", "longrope", "llama3", "mrope", "default"}


def _has_model(facts: dict[str, Any]) -> bool:
    return bool(facts.get("model_files") or facts.get("model_config"))


def check_chat_template(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """No chat template: /v1/chat/completions fails (transformers >= 4.44 has no default) while
    /v1/completions works, which reads as a broken model. Fail unless the inventory supplies one
    (`chat_template`) or says it serves completions only."""
    if facts.get("model_files") is None and facts.get("tokenizer_config") is None:
        return None  # folder not listed (old snapshot, weights not there yet): nothing known
    files = facts.get("model_files") or []
    in_tokenizer = bool((facts.get("tokenizer_config") or {}).get("chat_template"))
    found = [f for f in TEMPLATE_FILES if f in files] + (["tokenizer_config.json"] if in_tokenizer else [])
    if found:
        return Check("model.chat_template", PASS, f"chat template found ({', '.join(found)})")
    if cfg.chat_template:
        return Check(
            "model.chat_template",
            PASS,
            f"no chat template in the model; the unit passes --chat-template {cfg.chat_template}",
        )
    if cfg.serve_completions_only:
        return Check(
            "model.chat_template",
            WARN,
            "no chat template: /v1/chat/completions will answer 400, "
            "only /v1/completions serves (serve_completions_only is set)",
        )
    return Check(
        "model.chat_template",
        FAIL,
        "the model has no chat template (no chat_template in "
        "tokenizer_config.json, no chat_template.jinja): every /v1/chat/completions request fails",
        "add the model's template (chat_template.jinja beside config.json, or `chat_template: PATH` in "
        "the inventory), or set `serve_completions_only: true` to serve /v1/completions only",
    )


def check_remote_code(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """Custom modeling code (config.json auto_map, modeling_*.py) runs only with
    trust_remote_code, and then it runs as the service user: refuse unless the inventory says so,
    and name the files either way."""
    if not _has_model(facts):
        return None
    code = custom_code_files(facts.get("model_files") or [], facts.get("model_config"))
    if not code:
        return Check("model.remote_code", PASS, "no custom code in the model folder")
    listed = ", ".join(code)
    if cfg.trust_remote_code:
        return Check(
            "model.remote_code",
            WARN,
            f"trust_remote_code is set: vLLM will import the model's own code ({listed}) as the service user",
            "review those files before deploying",
        )
    return Check(
        "model.remote_code",
        FAIL,
        f"the model ships its own code ({listed}); vLLM refuses to load it without --trust-remote-code",
        "review the files, then set `trust_remote_code: true` for "
        "this model, or use a checkpoint whose architecture vLLM implements natively",
    )


def check_checkpoint_quantization(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """config.json's quantization_config against the inventory's `quantization` and the GPUs
    (the same table as the inventory's quantisation: vllm_facts quantization_requirements)."""
    qc = (facts.get("model_config") or {}).get("quantization_config") or {}
    method = str(qc.get("quant_method") or "").lower()
    if not method:
        return None
    want = (cfg.quantization or "").lower()
    if want and want not in COMPATIBLE_QUANT.get(method, {method}):
        return Check(
            "model.quantization",
            FAIL,
            f"the checkpoint is {method}-quantised but the inventory sets "
            f"quantization: {want}; vLLM stops: the quantization method in the model config does "
            "not match the `quantization` argument",
            f"set `quantization: {method}` or remove it (vLLM reads it from config.json)",
        )
    req = vllm_facts.quantization_requirement(method)
    names = sorted({g.get("name") for g in facts.get("gpus") or []})
    if req and req.get("severity") != "warn":
        bad = [n for n in names if req["lack"] in vllm_facts.gpu_lacks(n)]
        if bad:
            return Check(
                "model.quantization",
                FAIL,
                f"the checkpoint is {method}-quantised; {', '.join(bad)} lack {req['lack']} kernels",
                "use an fp16/bf16 checkpoint of the model on these GPUs",
            )
    if req and req.get("severity") == "warn":
        slow = [n for n in names if req["lack"] in vllm_facts.gpu_slow(n)]
        if slow:
            return Check(
                "model.quantization",
                WARN,
                f"the checkpoint is {method}-quantised; on {', '.join(slow)}: {req['message']}",
                "prefer an fp16 checkpoint on these GPUs",
            )
    return Check("model.quantization", PASS, f"{method} checkpoint" + (f" on {', '.join(names)}" if names else ""))


def derived_max_len(config: dict[str, Any]) -> int | None:
    """The longest context vLLM derives from config.json (max_position_embeddings, times the rope
    scaling factor for linear/dynamic/yarn scaling), or None when the config names none."""
    mpe = config.get("max_position_embeddings")
    if not mpe:
        return None
    rs = config.get("rope_scaling") or {}
    kind = str(rs.get("rope_type") or rs.get("type") or "default")
    factor = rs.get("factor")
    if not factor or kind in NO_SCALE_ROPE:
        return int(mpe)
    base = rs.get("original_max_position_embeddings", mpe) if kind == "yarn" else mpe
    return int(int(base) * float(factor))


def check_max_model_len(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    """max_model_len above what config.json allows: vLLM refuses to start (unless
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which risks wrong outputs)."""
    model, want = facts.get("model_config"), cfg.max_model_len
    limit = derived_max_len(model) if model else None
    if not want or not limit:
        return None
    if int(want) > limit:
        return Check(
            "model.max_model_len",
            FAIL,
            f"max_model_len {want} exceeds the {limit} tokens config.json "
            "allows (max_position_embeddings, rope scaling): vLLM refuses to start",
            f"set max_model_len <= {limit}",
        )
    return Check("model.max_model_len", PASS, f"max_model_len {want} <= {limit} (config.json)")


def model_checks(cfg: HostConfig, facts: dict[str, Any]) -> list[Check]:
    """Every model-folder check that has something to say."""
    out = [
        check_chat_template(cfg, facts),
        check_remote_code(cfg, facts),
        check_checkpoint_quantization(cfg, facts),
        check_max_model_len(cfg, facts),
        check_speculative(cfg, facts),
    ]
    return [c for c in out if c is not None] + check_adapters(cfg, facts)
