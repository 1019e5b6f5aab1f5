"""What the model folder says about how it must be served, read the same way from a host's gather
output and from the controller's `model_source` folder (offline, before the weights are synced).

Why reduced: tokenizer_config.json can hold tens of thousands of added tokens; the checks need only
whether a chat template is there, so facts and snapshots keep that, not the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from vfleet.engine.strict_json import JsonFileError, read_bounded

from ._model_files import TOKENIZER_CONFIG_LIMIT, parse_tokenizer_meta, read_config

# Files whose presence means the checkpoint ships Python that transformers/vLLM would import.
CUSTOM_CODE_RE = re.compile(r"^(modeling|configuration|tokenization|processing|image_processing)_.+\.py$")
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
MAX_FOLDER_ENTRIES = 100_000


def model_files(output: str, model_dir: str = "the model folder") -> list[str]:
    """`ls -1A <model dir>` -> sorted file names (top level only); more than MAX_FOLDER_ENTRIES
    is refused, as for a local folder (folder_names)."""
    names = sorted({ln.strip() for ln in (output or "").splitlines() if ln.strip()})
    if len(names) > MAX_FOLDER_ENTRIES:
        raise JsonFileError(f"{model_dir}: more than {MAX_FOLDER_ENTRIES} entries; is this a model folder?")
    return names


def custom_code_files(files: list[str], config: dict[str, Any] | None) -> list[str]:
    """Python the checkpoint would run: modeling_*.py & co in the folder, plus auto_map targets
    (`module.Class`, or `repo--module.Class` for code fetched from another repository)."""
    found = [f for f in files if CUSTOM_CODE_RE.match(f)]
    auto_map = (config or {}).get("auto_map") or {}
    refs = auto_map.values() if isinstance(auto_map, dict) else []
    for ref in refs:
        for r in ref if isinstance(ref, list) else [ref]:
            if not r:
                continue
            repo, _, target = str(r).rpartition("--")
            module = target.rsplit(".", 1)[0] + ".py"
            name = f"{repo}--{module}" if repo else module
            if name not in found:
                found.append(name)
    return found


def folder_names(folder: Path) -> list[str]:
    """Top-level names of a local folder, sorted; more than MAX_FOLDER_ENTRIES is refused (a model
    folder holds tens of files, a few thousand shards at most)."""
    names = []
    for entry in folder.iterdir():
        names.append(entry.name)
        if len(names) > MAX_FOLDER_ENTRIES:
            raise JsonFileError(f"{folder}: more than {MAX_FOLDER_ENTRIES} entries; is this a model folder?")
    return sorted(names)


def model_facts_from_folder(path: str | Path) -> dict[str, Any]:
    """{model_config, model_files, tokenizer_config} of a local model folder: the facts the model
    checks read, for the controller's `model_source` (missing files give None / []). The files
    are read bounded and checked (_model_files.py): a hostile one is a one-line JsonFileError."""
    p = Path(path)
    files = folder_names(p) if p.is_dir() else []
    config = read_config(p / "config.json") if "config.json" in files else None
    tokenizer = None
    if "tokenizer_config.json" in files:
        f = p / "tokenizer_config.json"
        tokenizer = parse_tokenizer_meta(read_bounded(f, TOKENIZER_CONFIG_LIMIT), str(f))
    return {"model_config": config, "model_files": files, "tokenizer_config": tokenizer}


def with_model_source(facts: dict[str, Any], folder: Path | None) -> dict[str, Any]:
    """`facts` with the model keys the host could not give (weights not synced yet) filled from
    `folder`, the controller's copy of the model (the weights role's controller_folder: a local
    model_source, or a hub source's verified export; None for HOST:/path sources)."""
    if folder is None:
        return facts
    local = model_facts_from_folder(folder)
    return {**facts, **{k: v for k, v in local.items() if not facts.get(k)}}
