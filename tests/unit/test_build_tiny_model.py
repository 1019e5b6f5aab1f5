"""vfleet/lab/model/build_tiny_model.py: needs torch/transformers/tokenizers (requirements-lab.txt);
skipped where they are not installed. A build trains for about 20-30 s on 2 cores, so the tests
share one build per session (lab_model) and only the determinism test builds a second one."""

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from vfleet.lab.model.build_tiny_model import build_tiny_model  # noqa: E402
from vfleet.lab.model.corpus import GENERAL_CHAT, Conversation, eval_conversations  # noqa: E402
from vfleet.lab.model.train import TrainingFailed, TrainSettings, greedy_replies, wrong_answers  # noqa: E402
from vfleet.roles.model_source._manifest import make_manifest  # noqa: E402


def lab_model(tmp_path_factory) -> Path:
    """The model built once per test session (also used by test_lab_model_variants.py)."""
    d = tmp_path_factory.getbasetemp() / "lab-model"
    if not (d / "config.json").is_file():
        build_tiny_model(d)
    return d


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return lab_model(tmp_path_factory)


def test_build_is_deterministic_and_complete(model_dir, tmp_path):
    again = build_tiny_model(tmp_path / "again")
    ma, mb = make_manifest(model_dir), make_manifest(again)
    assert ma["text"] == mb["text"]  # byte-identical builds
    names = set(ma["files"])
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    } <= names
    cfg = json.loads((model_dir / "config.json").read_text())
    assert (
        cfg["hidden_size"],
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["head_dim"],
        cfg["num_hidden_layers"],
        cfg["dtype"],
    ) == (256, 4, 2, 64, 2, "bfloat16")
    assert "chat_template" in json.loads((model_dir / "tokenizer_config.json").read_text())


def test_chat_template_and_tokenizer_load(model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.decode(tok("Hello, world")["input_ids"]) == "Hello, world"


def test_the_model_answers_every_builtin_reference_and_stops(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert wrong_answers(model_dir) == []
    evalset = eval_conversations()
    assert len(evalset) == 24 and {c.reply for c in evalset} >= {"Paris.", "12", '{"sum": 4}'}
    chat = [Conversation(({"role": "user", "content": q},), a) for q, a in GENERAL_CHAT]
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    assert greedy_replies(model, tok, chat) == [(c.reply, True) for c in chat]


def test_a_build_that_does_not_learn_its_answers_fails_and_leaves_dest_alone(tmp_path):
    dest = tmp_path / "m"
    dest.mkdir()
    (dest / "keep").write_text("old model")
    with pytest.raises(TrainingFailed, match="after 3 training steps the smallest reply-token margin"):
        build_tiny_model(dest, TrainSettings(max_steps=3))
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no half-built folder left
    assert [p.name for p in dest.iterdir()] == ["keep"]


def test_deterministic_torch_gives_the_callers_settings_back():
    import torch

    from vfleet.lab.model.train import deterministic_torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with deterministic_torch(3):
            assert torch.get_num_threads() == 3 and torch.are_deterministic_algorithms_enabled()
        assert torch.get_num_threads() == 1 and not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.set_num_threads(before)
