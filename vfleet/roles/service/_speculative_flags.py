"""The speculative decoding word of a host's vLLM command line: `--speculative-config JSON`,
from speculative_decoding (vfleet/config/speculative.py).

Why only the keys vfleet knows: vLLM's SpeculativeConfig forbids extra fields, and an unknown
key makes the server exit at start (vLLM 0.32.0 vllm/config/utils.py: `extra="forbid"`;
measured: `"bogus": 1` ended the API server in ~7 s with a pydantic ValidationError). A draft
model is read from the host's synced copy (HostConfig.draft_path); ngram's lookup bounds are
written as given (vLLM 0.32.0 sets min = max when only the max is given,
vllm/config/speculative.py). A version without --speculative-config is refused (both
captured help texts, 0.20.0 and 0.32.0, list it).
"""

from __future__ import annotations

import json
from typing import Callable

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.errors import VfleetError

__all__ = ["SPECULATIVE_FLAG", "speculative_words", "speculative_json"]

SPECULATIVE_FLAG = "--speculative-config"


def speculative_json(cfg: HostConfig) -> dict[str, object]:
    """The JSON object vLLM gets (keys in a fixed order: the unit's text is stable)."""
    spec = cfg.speculative
    assert spec is not None
    out: dict[str, object] = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens}
    if spec.has_model:
        out["model"] = cfg.draft_path
    for key in ("prompt_lookup_max", "prompt_lookup_min"):
        if getattr(spec, key) is not None:
            out[key] = getattr(spec, key)
    return out


def speculative_words(cfg: HostConfig, ok: Callable[[str, str], bool]) -> list[str]:
    """[] without speculative_decoding, else the flag and its JSON."""
    if cfg.speculative is None:
        return []
    version = cfg.vllm_version or ""
    if not ok(SPECULATIVE_FLAG, version):
        raise VfleetError(
            f"speculative_decoding: vLLM {version} does not accept {SPECULATIVE_FLAG}; pin a "
            f"version with speculative decoding or remove speculative_decoding"
        )
    return [SPECULATIVE_FLAG, json.dumps(speculative_json(cfg), separators=(",", ":"))]
