"""The preflight facts that read the model folder: config.json, its top-level names,
tokenizer_config.json and the safetensors headers. Each reads a bounded amount (a huge or
special file there must neither hang the gather nor fill its output), and its parser is in
_model_files.py, _model_facts.py or _safetensors_header.py; facts_for (_fact_table.py) lists them."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

from vfleet.engine.strict_json import loads_strict, mapping

from . import _model_facts as model_facts, _model_files as model_files, _safetensors_header as safetensors_header
from ._fact_base import PreflightFact


def bounded_cat(path: str, limit: int) -> str:
    """`cat` of a regular file, at most limit + 1 bytes (one more than allowed, so the parser
    sees an oversized file as one): a FIFO would block `cat` forever, a huge file would fill the
    gather's output. A path that is not a regular file exits 1, as a missing one does."""
    p = shlex.quote(path)
    return f"[ -f {p} ] || exit 1\nhead -c {limit + 1} {p}"


def _sized(output: str, label: str, limit: int) -> bytes:
    data = output.encode("utf-8", "surrogatepass")
    if len(data) > limit:
        raise model_files.JsonFileError(f"{label}: more than the {limit // 2**20} MiB such a file can be; fix the file")
    return data


@dataclass(frozen=True)
class ModelConfig(PreflightFact):
    """config.json, read bounded and parsed strictly (_model_files.py); the checks on its keys
    run when the facts are assembled, so a snapshot's copy gets them too."""

    name, key = "model_config", "model_config"
    model_dir: str

    def command(self) -> str:
        return bounded_cat(self.model_dir + "/config.json", model_files.CONFIG_LIMIT)

    def parse(self, output: str) -> Any:
        label = posixpath.join(self.model_dir, "config.json")
        return dict(mapping(loads_strict(_sized(output, label, model_files.CONFIG_LIMIT), label), label))


@dataclass(frozen=True)
class ModelFiles(PreflightFact):
    """Top-level names in the model directory (custom code, chat_template.jinja)."""

    name, key = "model_files", "model_files"
    model_dir: str

    def command(self) -> str:
        d = shlex.quote(self.model_dir)
        # one name more than allowed, so the parser sees an oversized folder as one
        return f"[ -d {d} ] || exit 2\nls -1A {d} | head -n {model_facts.MAX_FOLDER_ENTRIES + 1}"

    def parse(self, output: str) -> Any:
        return model_facts.model_files(output, self.model_dir)


@dataclass(frozen=True)
class TokenizerConfig(PreflightFact):
    """tokenizer_config.json, reduced to whether it carries a chat template."""

    name, key = "tokenizer_config", "tokenizer_config"
    model_dir: str

    def command(self) -> str:
        return bounded_cat(self.model_dir + "/tokenizer_config.json", model_files.TOKENIZER_CONFIG_LIMIT)

    def parse(self, output: str) -> Any:
        label = posixpath.join(self.model_dir, "tokenizer_config.json")
        return model_files.parse_tokenizer_meta(_sized(output, label, model_files.TOKENIZER_CONFIG_LIMIT), label)


@dataclass(frozen=True)
class Weights(PreflightFact):
    """Safetensors headers only (8-byte length + JSON), never tensor data: the probe and its
    parser are in _safetensors_header.py."""

    name, key = "weights", "weights"
    model_dir: str

    def command(self) -> str:
        return safetensors_header.probe_command(self.model_dir)

    def parse(self, output: str) -> Any:
        return safetensors_header.parse_probe(output, self.model_dir)
