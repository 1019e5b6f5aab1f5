"""vfleet/lab/model/build_tiny_model.py: needs torch/transformers/tokenizers (requirements-lab.txt);
skipped where they are not installed."""
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from vfleet.lab.model.build_tiny_model import build_tiny_model  # noqa: E402
from vfleet.roles.weights.manifest import make_manifest  # noqa: E402


def test_build_is_deterministic_and_complete(tmp_path):
    a = build_tiny_model(tmp_path / "a")
    b = build_tiny_model(tmp_path / "b")
    ma, mb = make_manifest(a), make_manifest(b)
    assert ma["text"] == mb["text"]            # byte-identical builds
    names = set(ma["files"])
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json"} <= names
    cfg = json.loads((a / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["head_dim"], cfg["num_hidden_layers"]) == (256, 4, 2, 64, 2)
    assert "chat_template" in json.loads((a / "tokenizer_config.json").read_text())


def test_chat_template_and_tokenizer_load(tmp_path):
    from transformers import AutoTokenizer
    d = build_tiny_model(tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(str(d))
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.decode(tok("Hello, world")["input_ids"]) == "Hello, world"
