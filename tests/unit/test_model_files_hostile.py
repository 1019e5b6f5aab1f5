"""Hostile model files (config.json, tokenizer_config.json, safetensors headers, the shard
index) and impossible plan figures: each is refused with one line naming the file and the key,
never a traceback, a hang, a loop over a count read from the file, or a plan with nonsense
figures. Cases: tests/unit/data/model_files_hostile/ (configs.yaml); the binary ones are built
here."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.preflight_cases import config
from vfleet.engine.errors import VfleetError
from vfleet.engine.strict_json import JsonFileError, loads_strict, read_bounded
from vfleet.roles.model_source._manifest import ManifestError, index_shards
from vfleet.roles.preflight import _capacity as capacity, _facts as F
from vfleet.roles.preflight._capacity.parallel import plan_parallel
from vfleet.roles.preflight._facts import assemble
from vfleet.roles.preflight._model_facts import model_facts_from_folder
from vfleet.roles.preflight._model_files import CONFIG_LIMIT, read_config
from vfleet.roles.preflight._safetensors_header import file_weight_bytes, parse_probe, probe_command

DATA = Path(__file__).parent / "data" / "model_files_hostile"
BASE = (DATA / "base_config.json").read_text()
CASES = yaml.safe_load((DATA / "configs.yaml").read_text())
HOST = config({"model_dir": "/srv/models", "model_name": "m"})


def _text(case: dict[str, Any]) -> str:
    if "text" in case:
        return case["text"]
    base = json.loads(BASE)
    for key in case.get("drop") or []:
        base.pop(key)
    text = json.dumps(base, indent=1)
    if "patch" in case:
        text = text.rstrip().rstrip("}") + ", " + case["patch"].replace("DIGITS", "0" * 5000) + "}"
    return text


def _one_line(exc: pytest.ExceptionInfo, *fragments: str) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and "Traceback" not in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_hostile_config_json(case: dict[str, Any], tmp_path: Path) -> None:
    """From a local folder (plan --config, model_source) and from a host's gather output alike."""
    path = tmp_path / "config.json"
    path.write_text(_text(case))
    where = case.get("where", "read")
    if where == "read":
        with pytest.raises(JsonFileError) as exc:
            read_config(tmp_path)
        _one_line(exc, str(path), case["message"])
        with pytest.raises(JsonFileError) as exc:  # the host's copy: strict parse, then the same checks
            fact = F.facts_for(HOST)["model_config"]
            assemble({"model_config": fact.parse(path.read_text())}, HOST)
        _one_line(exc, "/srv/models/m/config.json", case["message"])
        return
    cfg = read_config(tmp_path)
    if where == "ok":
        assert capacity.plan(cfg, 81920).kv_capacity_tokens > 0
        return
    with pytest.raises(JsonFileError) as exc:
        capacity.plan(cfg, 81920, config_label=str(path))
    _one_line(exc, str(path), case["message"])
    with pytest.raises(JsonFileError) as exc:  # a host's plan names the file on the host
        capacity.plan_for_host(HOST, {"model_config": cfg, "gpus": [{"memory_total_mib": 81920}]})
    _one_line(exc, "/srv/models/m/config.json", case["message"])


def test_the_bound_itself_plans_quickly() -> None:
    """10,000 layers (the bound) drive the per-layer loops and the TP x PP search: still fast."""
    cfg = {
        **json.loads(BASE),
        "num_hidden_layers": 10_000,
        "layer_types": ["sliding_attention"] * 10_000,
        "sliding_window": 4096,
    }
    t0 = time.monotonic()
    p = capacity.plan(cfg, 81920)
    lay = plan_parallel(cfg, 81920, gpus_per_host=8, hosts=4)
    assert p.status == "fail" and not lay.fits
    assert time.monotonic() - t0 < 5


# --- encodings, nesting, what the file is ----------------------------------------------------


@pytest.mark.parametrize(
    "data,message",
    [
        ('{"a": 1}'.encode("utf-16"), "UTF-16 or UTF-32 text"),
        ('{"a": 1}'.encode("utf-16-le"), "UTF-16 or UTF-32 text"),
        (b'{"model_type": "\xff\xfe"}', "not UTF-8 (byte 16)"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deep"),
        (b'{"a": 1} trailing', "not valid JSON"),
    ],
)
def test_bytes_that_are_not_json(data: bytes, message: str) -> None:
    with pytest.raises(JsonFileError) as exc:
        loads_strict(data, "m/config.json")
    _one_line(exc, "m/config.json: ", message)


def test_a_utf8_bom_is_ignored() -> None:
    """RFC 8259 8.1: a parser MAY ignore a byte order mark."""
    assert loads_strict(b'\xef\xbb\xbf{"a": 1}', "x") == {"a": 1}


def test_what_is_not_a_regular_file(tmp_path: Path) -> None:
    """A FIFO is refused without blocking, a folder and a device are refused, a huge (sparse)
    file without being read."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "dir").mkdir()
    huge = tmp_path / "huge"
    with open(huge, "wb") as fh:
        fh.truncate(1 << 40)
    for path, message in (
        (fifo, "not a regular file"),
        (tmp_path / "dir", "is a directory"),
        (Path("/dev/zero"), "not a regular file"),
        (huge, "1099511627776 bytes, more than the 4 MiB"),
        (tmp_path / "absent", "cannot open"),
    ):
        with pytest.raises(JsonFileError) as exc:
            read_bounded(path, CONFIG_LIMIT)
        _one_line(exc, str(path), message)


def test_model_folder_with_a_fifo_or_folder_for_config(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "config.json")
    (tmp_path / "tokenizer_config.json").mkdir()
    with pytest.raises(JsonFileError) as exc:
        model_facts_from_folder(tmp_path)
    _one_line(exc, "config.json: is not a regular file")
    os.unlink(tmp_path / "config.json")
    with pytest.raises(JsonFileError) as exc:
        model_facts_from_folder(tmp_path)
    _one_line(exc, "tokenizer_config.json: is a directory")


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"chat_template": 5}', "key 'chat_template': expected a string or a list of named templates, got an integer"),
        ('{"chat_template": "x", "tokenizer_class": ["A"]}', "key 'tokenizer_class'"),
        ('{"chat_template": NaN}', "NaN is not a JSON number"),
        ('["chat_template"]', "expected a JSON object, got a list"),
    ],
)
def test_hostile_tokenizer_config(text: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(text)
    with pytest.raises(JsonFileError) as exc:
        model_facts_from_folder(tmp_path)
    _one_line(exc, "tokenizer_config.json", message)
    with pytest.raises(JsonFileError) as exc:
        F.facts_for(HOST)["tokenizer_config"].parse(text)
    _one_line(exc, "/srv/models/m/tokenizer_config.json", message)


# --- safetensors ------------------------------------------------------------------------------


def _st(path: Path, header: Any, data: int = 64, length: int | None = None, raw: bytes | None = None) -> Path:
    body = raw if raw is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(body) if length is None else length) + body + b"\0" * data)
    return path


GOOD = {"w": {"dtype": "BF16", "shape": [4, 8], "data_offsets": [0, 64]}}


@pytest.mark.parametrize(
    "name,kw,message",
    [
        ("terabyte length", {"header": GOOD, "length": 1 << 40}, "header length 1099511627776"),
        ("length past the end", {"header": GOOD, "length": 5000}, "header length 5000"),
        ("not JSON", {"header": None, "raw": b"{not json}"}, "not valid JSON"),
        ("not a mapping", {"header": [1, 2]}, "expected a JSON object, got a list"),
        (
            "unknown dtype",
            {"header": {"w": {"dtype": "Q9", "shape": [4], "data_offsets": [0, 4]}}},
            "unknown dtype 'Q9'",
        ),
        (
            "negative dim",
            {"header": {"w": {"dtype": "F16", "shape": [-4, 8], "data_offsets": [0, 0]}}},
            "shape must be",
        ),
        ("float dim", {"header": {"w": {"dtype": "F16", "shape": [1.5], "data_offsets": [0, 0]}}}, "shape must be"),
        ("bool dim", {"header": {"w": {"dtype": "F16", "shape": [True], "data_offsets": [0, 0]}}}, "shape must be"),
        (
            "shape a string",
            {"header": {"w": {"dtype": "F16", "shape": "4,8", "data_offsets": [0, 0]}}},
            "shape must be",
        ),
        ("tensor a number", {"header": {"w": 5}}, "tensor 'w': expected an object, got an integer"),
        (
            "more bytes than the file",
            {"header": {"w": {"dtype": "F32", "shape": [10**12, 10**12]}}},
            "the header's tensors need more bytes than the file's 64",
        ),
        ("metadata not strings", {"header": {"__metadata__": {"format": 1}, **GOOD}}, "key '__metadata__'"),
        ("NaN in the header", {"header": None, "raw": b'{"w": {"dtype": "F16", "shape": [NaN]}}'}, "NaN"),
    ],
)
def test_hostile_safetensors(name: str, kw: dict, message: str, tmp_path: Path) -> None:
    """The same refusal from the local reader and from the host's shell probe."""
    md = tmp_path / "model"
    md.mkdir()
    _st(md / "model.safetensors", **kw)
    with pytest.raises(JsonFileError) as exc:
        file_weight_bytes(md)
    _one_line(exc, "model.safetensors", message)
    out = subprocess.run(["sh", "-c", probe_command(str(md))], capture_output=True, text=True, timeout=30)
    with pytest.raises(JsonFileError) as exc:
        parse_probe(out.stdout, str(md))
    _one_line(exc, f"{md}/model.safetensors", message.split(" 1099")[0].split(" 5000")[0])


def test_good_safetensors_and_odd_files(tmp_path: Path) -> None:
    _st(tmp_path / "a.safetensors", GOOD)
    assert file_weight_bytes(tmp_path) == 64
    os.mkfifo(tmp_path / "b.safetensors")  # not a regular file: not a shard (the probe's [ -f ] alike)
    assert file_weight_bytes(tmp_path) == 64
    (tmp_path / "c.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(JsonFileError) as exc:
        file_weight_bytes(tmp_path)
    _one_line(exc, "c.safetensors: shorter than the 8-byte header length")


@pytest.mark.parametrize(
    "output,message",
    [
        ("@@ST-TOO-MANY\n", "/srv/m: more than 10000 .safetensors files"),
        (
            "@@ST 999999999 99999999 a.safetensors\n\n@@ST-TOO-MUCH\n",
            "/srv/m: the .safetensors headers add up to more than",
        ),
        ("@@ST 100 -5 a.safetensors\n\n", "/srv/m/a.safetensors: header length -5 is not within"),
        ("@@ST many 5 a.safetensors\n{}\n", "/srv/m/a.safetensors: size unreadable"),
    ],
)
def test_probe_output_bounds(output: str, message: str) -> None:
    with pytest.raises(JsonFileError) as exc:
        parse_probe(output, "/srv/m")
    _one_line(exc, message)


def test_folder_listings_are_bounded() -> None:
    with pytest.raises(JsonFileError) as exc:
        F.facts_for(HOST)["model_files"].parse("\n".join(f"f{i}" for i in range(100_001)))
    _one_line(exc, "/srv/models/m: more than 100000 entries")


# --- model.safetensors.index.json -------------------------------------------------------------


@pytest.mark.parametrize(
    "total,message",
    [
        ("-5", "key 'metadata.total_size': expected a positive integer <= 1000000000000000, got -5"),
        ("0", "got 0"),
        ('"16GB"', "got a string"),
        ("1e20", "got a huge number"),
        ("NaN", "NaN is not a JSON number"),
        ("100000000000000000000", "got a huge number"),
        ("2.5", "got 2.5"),
        ("true", "got a boolean"),
    ],
)
def test_hostile_index_total_size(total: str, message: str, tmp_path: Path) -> None:
    """A negative total_size used to give a passing plan (and the gateway's max_conns from it)."""
    (tmp_path / "config.json").write_text(BASE)
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"metadata": {"total_size": %s}, "weight_map": {"w": "model-00001.safetensors"}}' % total
    )
    with pytest.raises(JsonFileError) as exc:
        capacity.weights_bytes_from_dir(tmp_path)
    _one_line(exc, "model.safetensors.index.json", message)


@pytest.mark.parametrize("text", ['{"weight_map": [1]}', '{"weight_map": {"w": 5}}', "[]", '{"weight_map": Infinity}'])
def test_hostile_index_for_the_manifest(text: str, tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(text)
    with pytest.raises(ManifestError if "Infinity" not in text and text != "[]" else JsonFileError) as exc:
        index_shards(tmp_path)
    _one_line(exc, "model.safetensors.index.json")
    assert isinstance(exc.value, VfleetError)


# --- a snapshot's facts.json and the plan's own inputs ----------------------------------------


@pytest.mark.parametrize(
    "values,message",
    [
        ({"weights": {"files": 1, "bytes": -5, "dtypes": {}}}, "key 'weights'"),
        ({"weights": {"files": 1, "bytes": 1.5e30, "dtypes": {}}}, "key 'weights'"),
        ({"weights": [1]}, "expected a JSON object"),
        ({"model_config": {"num_hidden_layers": 10**12}}, "/srv/models/m/config.json: key 'num_hidden_layers'"),
        ({"model_config": "llama"}, "expected a JSON object, got a string"),
        ({"tokenizer_config": {"chat_template": "yes"}}, "key 'chat_template': expected true or false"),
    ],
)
def test_hostile_snapshot_model_facts(values: dict, message: str) -> None:
    with pytest.raises(JsonFileError) as exc:
        assemble(values, HOST)
    _one_line(exc, message)


@pytest.mark.parametrize(
    "kw,message",
    [
        (
            {"gpu_memory_mib": 0},
            "the GPU's memory in MiB (nvidia-smi memory.total, or --gpu-memory-mib) must be an "
            "integer from 1 to 16777216, got 0",
        ),
        ({"gpu_memory_mib": -81920}, "got -81920"),
        ({"gpu_memory_mib": 81920.5}, "got 81920.5"),
        ({"gpu_memory_utilization": float("nan")}, "gpu_memory_utilization must be a number in (0, 1], got nan"),
        ({"gpu_memory_utilization": 0}, "gpu_memory_utilization"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        (
            {"weights_bytes": -5},
            "the weights' size in bytes (safetensors index or headers, or model_size_bytes) must "
            "be an integer from 1 to 1000000000000000, got -5",
        ),
        ({"tp": 0}, "tensor_parallel_size must be an integer from 1 to 1024, got 0"),
        ({"max_model_len": -1}, "max_model_len"),
        ({"max_num_seqs": 0}, "max_num_seqs"),
        ({"kv_cache_memory_bytes": -1}, "kv_cache_memory_bytes"),
    ],
)
def test_plan_refuses_impossible_figures(kw: dict, message: str) -> None:
    args = {"gpu_memory_mib": 81920, **kw}
    with pytest.raises(VfleetError) as exc:
        capacity.plan(json.loads(BASE), args.pop("gpu_memory_mib"), **args)
    _one_line(exc, "plan: ", message)


@pytest.mark.parametrize("space", [float("nan"), float("inf"), -1, 0])
def test_cpu_plan_refuses_impossible_space(space: float) -> None:
    with pytest.raises(VfleetError) as exc:
        capacity.cpu_kv_capacity_tokens(json.loads(BASE), space)
    _one_line(exc, "cpu_kvcache_space_gib")
