"""vfleet/lab/model/build_lora.py: the two LoRA adapters of the lab model, built with peft on the
model built once per session (tests/unit/test_build_tiny_model.py); about 10-20 s of training on
2 cores. Skipped where torch/transformers/peft are not installed (requirements-lab.txt)."""

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from tests.unit.test_build_tiny_model import lab_model  # noqa: E402
from vfleet.lab.model.build_lora import ADAPTERS, BUILD_STAMP, TARGET_MODULES, WORDS, adapter_reply, build_lora_adapters  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = lab_model(tmp_path_factory)
    return base, build_lora_adapters(base, tmp_path_factory.mktemp("lora"))


def test_adapter_configs_carry_rank_base_and_targets(built):
    base, out = built
    assert set(out) == {"tiny-alpha", "tiny-bravo"} == set(WORDS)
    ranks = {}
    for name, folder in out.items():
        cfg = json.loads((folder / "adapter_config.json").read_text())
        ranks[name] = cfg["r"]
        assert cfg["peft_type"] == "LORA" and cfg["lora_alpha"] == 2 * cfg["r"]
        assert cfg["base_model_name_or_path"] == str(base.resolve())
        assert cfg["target_modules"] == sorted(TARGET_MODULES)  # sorted: same bytes every build
        assert (folder / "adapter_model.safetensors").is_file()
        assert json.loads((folder / BUILD_STAMP).read_text())["rank"] == cfg["r"]
    assert ranks == {a.name: a.rank for a in ADAPTERS} == {"tiny-alpha": 8, "tiny-bravo": 16}


def test_each_adapter_answers_its_word_and_the_base_does_not(built):
    base, out = built
    for name, folder in out.items():
        assert adapter_reply(base, folder) == (WORDS[name], True)
    reply, _ = adapter_reply(base, None)
    assert reply not in WORDS.values()


def test_rebuild_with_the_same_recipe_is_skipped(built):
    base, out = built
    before = {name: (folder / "adapter_model.safetensors").stat().st_mtime_ns for name, folder in out.items()}
    again = build_lora_adapters(base, next(iter(out.values())).parent)
    assert again == out
    assert {name: (folder / "adapter_model.safetensors").stat().st_mtime_ns for name, folder in again.items()} == before
