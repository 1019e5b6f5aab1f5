"""What the model folder says about how it must be served, read the same way from a host's gather
output and from the controller's `model_source` folder (offline, before the weights are synced).

Why reduced: tokenizer_config.json can hold tens of thousands of added tokens; the checks need only
whether a chat template is there, so facts and snapshots keep that, not the file.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# Files whose presence means the checkpoint ships Python that transformers/vLLM would import.
CUSTOM_CODE_RE = re.compile(r"^(modeling|configuration|tokenization|processing|image_processing)_.+\.py$")
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


def model_files(output: str) -> list[str]:
    """`ls -1A <model dir>` -> sorted file names (top level only)."""
    return sorted({ln.strip() for ln in (output or "").splitlines() if ln.strip()})


def tokenizer_meta(output: str) -> dict[str, Any] | None:
    """tokenizer_config.json -> {"chat_template": bool, "tokenizer_class": str | None}; None when
    missing or not JSON. A list of named templates (HF's multi-template form) counts when any has
    a body."""
    try:
        cfg = json.loads(output)
    except (ValueError, TypeError):
        return None
    if not isinstance(cfg, dict):
        return None
    tpl = cfg.get("chat_template")
    if isinstance(tpl, list):
        has = any(isinstance(t, dict) and str(t.get("template") or "").strip() for t in tpl)
    else:
        has = bool(str(tpl or "").strip())
    return {"chat_template": has, "tokenizer_class": cfg.get("tokenizer_class")}


def custom_code_files(files: list[str], config: dict[str, Any] | None) -> list[str]:
    """Python the checkpoint would run: modeling_*.py & co in the folder, plus auto_map targets
    (`module.Class`, or `repo--module.Class` for code fetched from another repository)."""
    found = [f for f in files if CUSTOM_CODE_RE.match(f)]
    auto_map = (config or {}).get("auto_map") or {}
    refs = auto_map.values() if isinstance(auto_map, dict) else []
    for ref in refs:
        for r in (ref if isinstance(ref, list) else [ref]):
            if not r:
                continue
            repo, _, target = str(r).rpartition("--")
            module = target.rsplit(".", 1)[0] + ".py"
            name = f"{repo}--{module}" if repo else module
            if name not in found:
                found.append(name)
    return found


def model_facts_from_folder(path: str | Path) -> dict[str, Any]:
    """{model_config, model_files, tokenizer_config} of a local model folder: the facts the model
    checks read, for the controller's `model_source` (missing files give None / [])."""
    p = Path(path)
    files = model_files("\n".join(f.name for f in p.iterdir())) if p.is_dir() else []

    def read(name: str) -> str:
        f = p / name
        return f.read_text(encoding="utf-8") if f.is_file() else ""

    config = None
    try:
        config = json.loads(read("config.json")) if "config.json" in files else None
    except ValueError:
        config = None
    return {"model_config": config if isinstance(config, dict) else None, "model_files": files,
            "tokenizer_config": tokenizer_meta(read("tokenizer_config.json"))}


def with_model_source(facts: dict[str, Any], source: str | None) -> dict[str, Any]:
    """`facts` with the model keys the host could not give (weights not synced yet) filled from the
    controller's `model_source` folder; `host:/path` sources live on the host and add nothing."""
    src = source or ""
    if not src or ":" in src or not Path(src).is_dir():
        return facts
    local = model_facts_from_folder(src)
    return {**facts, **{k: v for k, v in local.items() if not facts.get(k)}}
