"""vLLM environment file rendering (vfleet/roles/service/_render.py): secrets only there, never in the
unit or a traceback; NCCL variables from preflight or the inventory; the order of the items; and
the whole file read back by a real shell.

Every config is a real HostConfig (tests/unit/configs.py: inventory loader + schema)."""

import dataclasses
import os
import shlex
import shutil
import subprocess
import traceback

import pytest

from tests.unit.configs import host_config
from tests.unit.service_cases import HF_SECRET, LAB, SECRET, lab, stub_flag_available
from tests.unit.test_quoting import systemd_read_env_value
from vfleet.engine.errors import InventoryError
from vfleet.roles.service import _render as sr


def _read_env(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        k, _, v = line.partition("=")
        out[k] = systemd_read_env_value(v)
    return out


def test_secrets_only_in_env_file():
    cfg = lab(api_key=SECRET, hf_token=HF_SECRET)
    rs = sr.render_service(cfg, stub_flag_available, nccl_env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})
    for secret in (SECRET, HF_SECRET):
        assert secret not in rs.unit_text
    for part in ("sk-lab", "very", "secret", "hf_lab", "gated"):
        assert part not in rs.unit_text, part
    assert "--api-key" not in rs.unit_text
    env = _read_env(rs.env_text)
    assert env["VLLM_API_KEY"] == SECRET
    assert env["HF_TOKEN"] == HF_SECRET
    assert env["NCCL_P2P_DISABLE"] == "1" and env["NCCL_SHM_DISABLE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    # nor in a repr that could reach a log line or a traceback
    for text in (repr(rs), repr(cfg), str(cfg)):
        assert "sk-lab" not in text and "hf_lab" not in text
    # no secret set: no secret line
    env = _read_env(sr.render_env(lab()))
    assert "VLLM_API_KEY" not in env and "HF_TOKEN" not in env


def _as_printed(exc: BaseException) -> str:
    """What a traceback would show of an exception: its message and those of the chained
    exceptions it displays (__cause__, or __context__ unless suppressed)."""
    out = []
    while exc is not None:
        out.append("".join(traceback.format_exception_only(type(exc), exc)) + repr(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return "\n".join(out)


@pytest.mark.parametrize("var", ["api_key", "hf_token"])
@pytest.mark.parametrize("cc", ["\n", "\r", "\t"])
def test_secret_with_a_control_character_is_refused_without_showing_it(var, cc):
    # the schema refuses it first; the renderer checks again, whoever built the config
    cfg = dataclasses.replace(lab(), **{var: f"sk-topsecret-4711{cc}EXTRA=injected"})
    for render in (lambda: sr.render_env(cfg), lambda: sr.render_service(cfg, stub_flag_available)):
        with pytest.raises(sr.RenderError) as e:
            render()
        shown = _as_printed(e.value)
        for part in ("topsecret", "4711", "injected"):
            assert part not in shown, shown


@pytest.mark.parametrize("name", ["VLLM_API_KEY", "HF_TOKEN"])
def test_vllm_env_may_not_set_the_secrets(name):
    cfg = lab(vllm_env={name: "sneaky-value"})
    for render in (lambda: sr.render_env(cfg), lambda: sr.render_service(cfg, stub_flag_available)):
        with pytest.raises(sr.RenderError, match=name) as e:
            render()
        assert "sneaky" not in str(e.value)


def test_env_file_nccl_and_extras():
    preflight = {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}
    v = {"vllm_env": {"OMP_NUM_THREADS": "2", "WEIRD": "a b $c 'd'"}}
    env = _read_env(sr.render_env(lab(**v), nccl_env=preflight))
    assert env["NCCL_P2P_DISABLE"] == "1" and env["NCCL_IB_DISABLE"] == "1"
    assert env["OMP_NUM_THREADS"] == "2"
    assert env["WEIRD"] == "a b $c 'd'"
    assert "VLLM_API_KEY" not in env
    # the inventory's nccl_env replaces preflight's decision (no merge)
    env = _read_env(sr.render_env(lab(**v, nccl_env={"NCCL_P2P_DISABLE": "0"}), nccl_env=preflight))
    assert env["NCCL_P2P_DISABLE"] == "0"
    assert "NCCL_IB_DISABLE" not in env
    # an empty mapping replaces it too: no NCCL_ variable at all
    env = _read_env(sr.render_env(lab(nccl_env={}), nccl_env=preflight))
    assert not [k for k in env if k.startswith("NCCL_")]
    with pytest.raises(sr.RenderError, match="NCCL_"):
        sr.render_env(lab(), nccl_env={"LD_PRELOAD": "/x.so"})
    with pytest.raises(sr.RenderError, match="NCCL_"):
        sr.render_env(lab(nccl_env={"LD_PRELOAD": "/x.so"}))
    with pytest.raises(sr.RenderError):
        sr.render_env(dataclasses.replace(lab(), vllm_env={"X": "multi\nline"}))
    no_kv = _read_env(sr.render_env(lab(cpu_kvcache_space_gib=None)))
    assert "VLLM_CPU_KVCACHE_SPACE" not in no_kv


def test_env_items_order_and_gpu_selection():
    cfg = lab(api_key="k", hf_token="t", vllm_env={"OMP_NUM_THREADS": "2"}, cuda_visible_devices=[0, 1])
    keys = [k for k, _ in sr.env_items(cfg, nccl_env={"NCCL_P2P_DISABLE": "1"})]
    assert keys == [
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "NCCL_P2P_DISABLE",
        "VLLM_CPU_KVCACHE_SPACE",
        "CUDA_VISIBLE_DEVICES",
        "OMP_NUM_THREADS",
        "VLLM_API_KEY",
        "HF_TOKEN",
    ]
    assert dict(sr.env_items(cfg))["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert dict(sr.env_items(lab(cuda_visible_devices="2,3")))["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert "CUDA_VISIBLE_DEVICES" not in dict(sr.env_items(lab()))
    with pytest.raises(InventoryError, match="cuda_visible_devices"):
        host_config({**LAB, "cuda_visible_devices": "0;1"})


@pytest.mark.skipif(not shutil.which("sh"), reason="needs sh")
def test_env_file_is_read_back_by_a_real_shell(tmp_path):
    """The whole rendered file, sourced by a POSIX shell, gives back env_items exactly."""
    cfg = lab(api_key=SECRET, hf_token=HF_SECRET, vllm_env={"WEIRD": "a b $c 'd' `e` \\f", "EMPTY": ""})
    items = sr.env_items(cfg, nccl_env={"NCCL_P2P_DISABLE": "1"})
    f = tmp_path / "vllm.env"
    f.write_text(sr.render_env(cfg, nccl_env={"NCCL_P2P_DISABLE": "1"}))
    script = f"set -a; . {shlex.quote(str(f))}; " + "; ".join(f"printf '%s\\0' \"${k}\"" for k, _ in items)
    out = subprocess.run(
        ["sh", "-c", script], capture_output=True, env={"PATH": os.defpath}, check=True
    ).stdout.decode()
    assert out.split("\0")[:-1] == [v for _, v in items]
    assert _read_env(f.read_text()) == dict(items)
