"""Preflight's check of a host's speculative decoding, before the draft is copied: a draft
vLLM would refuse (another vocabulary), a draft that cannot be read, or MTP on a model without
next-token layers, each with the fix.

Pure function of (HostConfig, facts): facts["speculative_draft"] (_adapter_facts.py draft_facts)
and facts["model_config"]. vLLM 0.32.0 refuses a draft whose vocab_size differs from the
target's (vllm/config/speculative.py, "vocab sizes must match" check of the draft model).
"""

from __future__ import annotations

from typing import Any

from vfleet.config.hostconfig import HostConfig

from ._check_base import FAIL, PASS, WARN, Check, gib

__all__ = ["check_speculative"]

ID = "model.speculative"


def _vocab(config: dict[str, Any] | None) -> int | None:
    config = config or {}
    vocab = config.get("vocab_size", (config.get("text_config") or {}).get("vocab_size"))
    return vocab if isinstance(vocab, int) else None


def check_speculative(cfg: HostConfig, facts: dict[str, Any]) -> Check | None:
    spec = cfg.speculative
    if spec is None:
        return None
    if spec.method == "ngram":
        return Check(ID, PASS, f"ngram, {spec.num_speculative_tokens} tokens looked up in the prompt (no draft model)")
    target = facts.get("model_config")
    if spec.method == "mtp":
        layers = (target or {}).get("num_nextn_predict_layers")
        if target and not layers:
            return Check(
                ID,
                WARN,
                "mtp: config.json has no num_nextn_predict_layers: the model may have no "
                "multi-token-prediction layers, and vLLM then refuses to start",
                "check the model card, or use method ngram or a draft_model",
            )
        return Check(
            ID,
            PASS,
            f"mtp, {spec.num_speculative_tokens} tokens from the model's own {layers or '?'} next-token layers",
        )
    draft = facts.get("speculative_draft")
    if draft is None:
        return None
    if "error" in draft:
        return Check(
            ID,
            FAIL,
            f"{spec.method}: the draft {spec.source}: {draft['error']}",
            "point speculative_decoding.source at a model folder (config.json and *.safetensors), "
            "or fill the Hugging Face cache with `hf download`",
        )
    mine, theirs = _vocab(target), _vocab(draft.get("config"))
    if mine and theirs and mine != theirs:
        return Check(
            ID,
            FAIL,
            f"{spec.method}: the draft's vocab_size {theirs} differs from the model's {mine}: "
            "vLLM refuses a draft with another vocabulary",
            "use a draft of the same family (the same tokenizer), e.g. a smaller model of its series",
        )
    size = f", {gib(draft['weights_bytes'])} of weights" if draft.get("weights_bytes") else ""
    return Check(
        ID,
        PASS,
        f"{spec.method}, {spec.num_speculative_tokens} tokens; the draft has "
        f"{(draft.get('config') or {}).get('num_hidden_layers', '?')} layers{size}, vocabulary {theirs or '?'}",
    )
