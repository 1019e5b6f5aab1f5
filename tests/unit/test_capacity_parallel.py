"""The smallest TP x PP that fits (vfleet/roles/preflight/_capacity/parallel.py), on public model shapes."""

from __future__ import annotations

import json
from pathlib import Path

from vfleet.roles.preflight._capacity import plan
from vfleet.roles.preflight._capacity.parallel import plan_parallel, stage_config

DATA = Path(__file__).parent / "data" / "replica"
L70 = json.loads((DATA / "llama-3.1-70b.json").read_text())
L405 = json.loads((DATA / "llama-3.1-405b.json").read_text())
L8 = json.loads((Path(__file__).parent / "data" / "planner" / "configs" / "llama-3.1-8b.json").read_text())


def test_a_model_that_fits_one_gpu_stays_on_one_gpu():
    p = plan_parallel(L8, 81559, gpus_per_host=8, hosts=2, max_model_len=8192)
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.hosts, p.multi_host, p.fits) == (1, 1, 1, False, True)


def test_405b_on_h100s_needs_two_hosts_with_tp_inside_each():
    p = plan_parallel(L405, 81559, gpus_per_host=8, hosts=2, max_model_len=8192)
    assert p.fits and p.multi_host and p.hosts == 2
    assert p.gpus == p.tensor_parallel_size * p.pipeline_parallel_size == 2 * p.gpus_per_host
    assert 8 % p.tensor_parallel_size == 0 and p.stage["status"] != "fail"


def test_405b_fp16_does_not_fit_two_v100_boxes_and_says_what_was_tried():
    p = plan_parallel(L405, 32768, gpus_per_host=8, hosts=2, dtype="float16", max_model_len=8192)
    assert not p.fits and p.stage is None
    assert p.tried[-1] == "no TP x PP over 2 host(s) of 8 GPUs fits"
    assert plan_parallel(L405, 32768, gpus_per_host=8, hosts=4, dtype="float16", max_model_len=8192).fits


def test_smaller_layouts_were_tried_first_and_failed():
    p = plan_parallel(L70, 32768, gpus_per_host=8, hosts=2, dtype="float16", max_model_len=8192)
    assert p.fits
    one_less = plan(L70, 32768, tp=4, dtype="float16", max_model_len=8192)
    assert one_less.status == "fail" and p.gpus > 4


def test_stage_config_takes_the_busiest_stage():
    assert stage_config(L70, 3)["num_hidden_layers"] == 27
    c = {**L8, "layer_types": ["full"] * 32}
    assert len(stage_config(c, 4)["layer_types"]) == 8
    wrapped = {"model_type": "x", "text_config": dict(L8)}
    assert stage_config(wrapped, 2)["text_config"]["num_hidden_layers"] == 16


def test_multi_host_layouts_split_evenly_over_hosts():
    p = plan_parallel(L405, 81559, gpus_per_host=8, hosts=4, max_model_len=8192)
    assert p.gpus_per_host * p.hosts == p.gpus
