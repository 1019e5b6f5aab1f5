"""vfleet/lab/model/variants.py: degraded and no-op copies of the trained lab model, measured with
transformers' greedy decoding on the built-in eval set (24 references)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from safetensors import safe_open  # noqa: E402

from tests.unit.test_build_tiny_model import lab_model  # noqa: E402
from vfleet.lab.model.train import wrong_answers  # noqa: E402
from vfleet.lab.model.variants import STRONG_SCALE, TINY_SCALE, main, perturb_weights, resave_unchanged  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return lab_model(tmp_path_factory)


def _tensors(folder):
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        return {name: f.get_tensor(name) for name in f.keys()}, f.metadata()


def _same_tensors(a, b) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_strong_scale_loses_at_least_a_third_of_the_answers(model_dir, tmp_path):
    bad = perturb_weights(model_dir, tmp_path / "bad", STRONG_SCALE, seed=0)
    assert len(wrong_answers(bad)) >= 8, "the degraded copy still answers more than 2/3 of the eval set"
    assert not (bad / "MANIFEST.sha256").exists()
    assert (bad / "tokenizer.json").read_bytes() == (model_dir / "tokenizer.json").read_bytes()


def test_the_tiny_scale_changes_the_weights_but_no_answer(model_dir, tmp_path):
    small = perturb_weights(model_dir, tmp_path / "small", TINY_SCALE, seed=0)
    (orig, _), (changed, meta) = _tensors(model_dir), _tensors(small)
    assert orig.keys() == changed.keys()
    moved = sum(int((orig[k] != changed[k]).sum()) for k in orig)
    assert moved > sum(t.numel() for t in orig.values()) / 2  # measured: 82% of the numbers
    assert meta == {"format": "pt"}
    assert wrong_answers(small) == []


def test_perturbing_is_deterministic_per_seed(model_dir, tmp_path):
    a = perturb_weights(model_dir, tmp_path / "a", TINY_SCALE, seed=7)
    b = perturb_weights(model_dir, tmp_path / "b", TINY_SCALE, seed=7)
    c = perturb_weights(model_dir, tmp_path / "c", TINY_SCALE, seed=8)
    weights = [(d / "model.safetensors").read_bytes() for d in (a, b, c)]
    assert weights[0] == weights[1] != weights[2]
    # a second write over an existing copy replaces it whole
    perturb_weights(model_dir, a, TINY_SCALE, seed=8)
    assert (a / "model.safetensors").read_bytes() == weights[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c"]


def test_resave_unchanged_has_other_bytes_and_the_same_tensors(model_dir, tmp_path):
    same = resave_unchanged(model_dir, tmp_path / "same")
    assert (same / "model.safetensors").read_bytes() != (model_dir / "model.safetensors").read_bytes()
    (orig, _), (copied, meta) = _tensors(model_dir), _tensors(same)
    assert _same_tensors(orig, copied) and meta is None
    assert wrong_answers(same) == []  # loads without the metadata block
    twice = resave_unchanged(same, tmp_path / "twice")  # a file without metadata gets one
    assert (twice / "model.safetensors").read_bytes() == (model_dir / "model.safetensors").read_bytes()


def test_cli_writes_a_copy_with_its_manifest_and_refuses_a_folder_without_weights(model_dir, tmp_path, capsys):
    assert main(["resave", str(model_dir), str(tmp_path / "r"), "--manifest"]) == 0
    assert "model.safetensors" in (tmp_path / "r" / "MANIFEST.sha256").read_text()
    assert main(["perturb", str(tmp_path / "nothing"), str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing: no model.safetensors here" in err
    assert not (tmp_path / "p").exists()
