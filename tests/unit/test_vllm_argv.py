"""vLLM command line (vfleet/roles/service/_argv.py): the flags each inventory variable renders, the ones a
pinned version lacks (dropped and reported), and vllm_extra_args checked like argparse would.

Every config is a real HostConfig (tests/unit/configs.py: inventory loader + schema); the flag
ground truth is vLLM 0.32.0's --help (tests/unit/service_cases.py)."""

import pytest

from tests.unit.configs import host_config
from tests.unit.service_cases import (
    ENGINE,
    FLAGS_0_32,
    HELP,
    LAB,
    _choices_from_help,
    _flags_from_help,
    argv_of,
    exec_words,
    lab,
    stub_flag_available,
    value_of,
)
from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import InventoryError
from vfleet.roles.service import _render as sr
from vfleet.roles.service._argv import ArgvError, vllm_argv


def test_help_ground_truth_has_the_flags_we_render():
    for flag in (
        "--model",
        "--served-model-name",
        "--host",
        "--port",
        "--dtype",
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--max-model-len",
        "--gpu-memory-utilization",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--enable-chunked-prefill",
        "--no-enable-chunked-prefill",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--quantization",
        "--kv-cache-dtype",
        "--block-size",
        "--trust-remote-code",
        "--shutdown-timeout",
        "--api-key",
    ):
        assert flag in FLAGS_0_32, flag
    assert "--disable-log-requests" not in FLAGS_0_32  # removed in 0.11
    assert "--swap-space" not in FLAGS_0_32


def test_schema_enums_are_values_vllm_accepts():
    """dtype and kv_cache_dtype are checked by the schema: every value it lets through must
    be one of the choices vLLM 0.32's own argparse offers."""
    for var, flag in (("dtype", "--dtype"), ("kv_cache_dtype", "--kv-cache-dtype")):
        assert set(SCHEMA.specs[var].json_schema["enum"]) <= _choices_from_help(HELP, flag), var


def test_argv_for_the_lab():
    r = vllm_argv(lab(), stub_flag_available)
    assert r.argv == [
        "/opt/vllm/current/bin/vllm",
        "serve",
        "/srv/models/tiny",
        "--served-model-name",
        "tiny",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--dtype",
        "bfloat16",
        "--tensor-parallel-size",
        "1",
        "--max-model-len",
        "2048",
        "--gpu-memory-utilization",
        "0.9",
        "--shutdown-timeout",
        "30",
    ]
    assert r.dropped == []


def test_dtype_tp_and_memory_fraction_always_render_the_schema_defaults():
    """The bug this fixes: preflight planned with the schema's defaults (auto, 1, 0.9) while
    the unit left the flags out and ran vLLM's. Now both read the same values."""
    cfg = host_config({})
    argv = argv_of(cfg)
    defaults = SCHEMA.defaults()
    assert (defaults["dtype"], defaults["tensor_parallel_size"], defaults["gpu_memory_utilization"]) == ("auto", 1, 0.9)
    assert value_of(argv, "--dtype") == "auto"
    assert value_of(argv, "--tensor-parallel-size") == "1"
    assert value_of(argv, "--gpu-memory-utilization") == "0.9"
    # the typed config preflight reads agrees with what the unit runs
    for value, flag in (
        (cfg.dtype, "--dtype"),
        (cfg.tensor_parallel_size, "--tensor-parallel-size"),
        (cfg.gpu_memory_utilization, "--gpu-memory-utilization"),
    ):
        assert value_of(argv, flag) == str(value), flag
    # vLLM's own defaults are left to vLLM for the rest
    for flag in (
        "--pipeline-parallel-size",
        "--max-model-len",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--kv-cache-dtype",
        "--quantization",
        "--block-size",
        "--swap-space",
        "--enforce-eager",
        "--trust-remote-code",
        "--enable-chunked-prefill",
        "--no-enable-chunked-prefill",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
    ):
        assert flag not in argv, flag


def test_all_flags_and_extra_args():
    cfg = lab(
        tensor_parallel_size=2,
        gpu_memory_utilization=0.85,
        max_num_seqs=64,
        vllm_extra_args=["--disable-log-stats", "--tokenizer-mode", "auto"],
    )
    argv = argv_of(cfg)
    for pair in (["--tensor-parallel-size", "2"], ["--gpu-memory-utilization", "0.85"], ["--max-num-seqs", "64"]):
        i = argv.index(pair[0])
        assert argv[i : i + 2] == pair
    # extra args come last, word for word
    assert argv[-3:] == ["--disable-log-stats", "--tokenizer-mode", "auto"]


def test_engine_variables_render_as_flags():
    argv = argv_of(lab(**ENGINE))
    for flag, value in (
        ("--tensor-parallel-size", "2"),
        ("--pipeline-parallel-size", "2"),
        ("--gpu-memory-utilization", "0.85"),
        ("--max-num-seqs", "64"),
        ("--max-num-batched-tokens", "8192"),
        ("--quantization", "awq"),
        ("--kv-cache-dtype", "fp8"),
        ("--block-size", "32"),
    ):
        assert value_of(argv, flag) == value, flag
    for switch in ("--enable-chunked-prefill", "--no-enable-prefix-caching", "--enforce-eager", "--trust-remote-code"):
        assert argv.count(switch) == 1, switch
    assert "--no-enable-chunked-prefill" not in argv and "--enable-prefix-caching" not in argv
    # every flag the renderer writes is one vLLM 0.32 knows (its --help is the ground truth)
    assert {w for w in argv if w.startswith("--")} <= FLAGS_0_32


@pytest.mark.parametrize(
    "var, value, present, absent",
    [
        ("enable_chunked_prefill", True, ["--enable-chunked-prefill"], ["--no-enable-chunked-prefill"]),
        ("enable_chunked_prefill", False, ["--no-enable-chunked-prefill"], ["--enable-chunked-prefill"]),
        ("enable_chunked_prefill", None, [], ["--enable-chunked-prefill", "--no-enable-chunked-prefill"]),
        ("enable_prefix_caching", True, ["--enable-prefix-caching"], ["--no-enable-prefix-caching"]),
        ("enable_prefix_caching", False, ["--no-enable-prefix-caching"], ["--enable-prefix-caching"]),
        ("enable_prefix_caching", None, [], ["--enable-prefix-caching", "--no-enable-prefix-caching"]),
        ("enforce_eager", True, ["--enforce-eager"], []),
        ("enforce_eager", False, [], ["--enforce-eager", "--no-enforce-eager"]),
        ("trust_remote_code", True, ["--trust-remote-code"], []),
        ("trust_remote_code", False, [], ["--trust-remote-code", "--no-trust-remote-code"]),
        ("kv_cache_dtype", "auto", [], ["--kv-cache-dtype"]),
        ("kv_cache_dtype", "fp8_e5m2", ["--kv-cache-dtype", "fp8_e5m2"], []),
        ("pipeline_parallel_size", 1, [], ["--pipeline-parallel-size"]),
        ("pipeline_parallel_size", 4, ["--pipeline-parallel-size", "4"], []),
        ("quantization", None, [], ["--quantization"]),
        ("block_size", 16, ["--block-size", "16"], []),
        ("max_num_batched_tokens", 2048, ["--max-num-batched-tokens", "2048"], []),
    ],
)
def test_engine_variable_spelling(var, value, present, absent):
    argv = argv_of(lab(**{var: value}))
    if present:
        i = argv.index(present[0])
        assert argv[i : i + len(present)] == present
    for flag in absent:
        assert flag not in argv, flag


def test_derived_values_and_defaults():
    argv = argv_of(lab(vllm_host="10.0.0.5"))
    assert value_of(argv, "--host") == "10.0.0.5"
    assert value_of(argv_of(lab()), "--host") == "0.0.0.0"
    # served name: model_name unless set
    assert value_of(argv_of(lab()), "--served-model-name") == "tiny"
    cfg = lab(served_model_name="tiny-chat")
    assert value_of(argv_of(cfg), "--served-model-name") == "tiny-chat"
    assert "(tiny-chat, vLLM 0.32.0)" in sr.render_unit(cfg, stub_flag_available)
    # model path: model_dir/model_name unless set
    assert argv_of(lab(model_dir="/data/m"))[2] == "/data/m/tiny"  # vllm serve MODEL
    assert argv_of(lab(model_path="/data/x/y"))[2] == "/data/x/y"
    # the venv: vllm_root/current
    assert argv_of(lab(vllm_root="/opt/v2"))[0] == "/opt/v2/current/bin/vllm"


def test_swap_space_only_where_the_version_has_it():
    facts = pytest.importorskip("vfleet.config.vllm_facts")
    old = vllm_argv(lab(vllm_version="0.5.4", swap_space=4), facts.flag_available)
    assert value_of(old.argv, "--swap-space") == "4"
    new = vllm_argv(lab(swap_space=4), facts.flag_available)
    assert "--swap-space" not in new.argv and "--swap-space" in new.dropped
    # the help of 0.32 agrees (the stub reads it)
    assert vllm_argv(lab(swap_space=4), stub_flag_available).dropped == ["--swap-space"]


def test_flags_the_version_lacks_are_dropped_and_reported():
    cfg = lab(vllm_version="0.17.0")
    r = vllm_argv(cfg, stub_flag_available)
    assert "--shutdown-timeout" not in r.argv and r.dropped == ["--shutdown-timeout"]
    unit = sr.render_unit(cfg, stub_flag_available)
    assert "--shutdown-timeout" not in unit
    assert "TimeoutStopSec=%d" % sr.STOP_TIMEOUT_DEFAULT_SEC in unit
    assert sr.render_service(cfg, stub_flag_available).dropped_flags == ["--shutdown-timeout"]
    # switches too: a version without --enforce-eager gets none, and it is reported
    r = vllm_argv(
        lab(enforce_eager=True, enable_chunked_prefill=False),
        FLAGS_0_32 - {"--enforce-eager", "--no-enable-chunked-prefill"},
    )
    assert "--enforce-eager" not in r.argv and "--no-enable-chunked-prefill" not in r.argv
    assert r.dropped == ["--no-enable-chunked-prefill", "--enforce-eager"]


def test_flag_available_may_be_a_set():
    r = vllm_argv(lab(), {"--port"})
    assert r.argv[3:] == ["--port", "8000"]
    for flag in (
        "--served-model-name",
        "--dtype",
        "--tensor-parallel-size",
        "--gpu-memory-utilization",
        "--shutdown-timeout",
    ):
        assert flag in r.dropped, flag


def test_entrypoint_is_the_versions_start_command():
    cfg = lab()
    r = vllm_argv(cfg, stub_flag_available)
    assert r.argv[:5] == ["/opt/vllm/current/bin/vllm", "serve", "/srv/models/tiny", "--served-model-name", "tiny"]
    assert "--model" not in r.argv  # with `vllm serve`, --model as well is an error (0.8.5+)
    unit = sr.render_unit(cfg, stub_flag_available)
    assert exec_words(unit) == r.argv
    assert "ExecStart=/opt/vllm/current/bin/vllm serve /srv/models/tiny \\\n" in unit


def test_extra_args_unknown_flag_refused():
    cfg = lab(vllm_extra_args=["--no-such-flag"])
    with pytest.raises(ArgvError, match="--no-such-flag"):
        vllm_argv(cfg, stub_flag_available)
    with pytest.raises(sr.RenderError, match="--no-such-flag"):
        sr.render_unit(cfg, stub_flag_available)
    with pytest.raises(sr.RenderError, match="--no-such-flag"):
        sr.render_service(cfg, stub_flag_available)
    # what argparse accepts passes: the --no- form of a switch, _ for -, =value (flags vfleet
    # does not render: those are refused, tests/unit/test_extra_args.py)
    words = [
        "--no-enable-log-outputs",
        "--max_logprobs",
        "8",
        "--tokenizer-mode=auto",
        "--api-server-count",
        "2",
    ]  # --api-server-count is not --api-key
    assert argv_of(lab(vllm_extra_args=words))[-len(words) :] == words


@pytest.mark.parametrize(
    "extra",
    [
        {"vllm_extra_args": "--enforce-eager"},  # a string, not a list of words
        {"vllm_extra_args": {"--enforce-eager": True}},  # a mapping
        {"vllm_extra_args": ["--port", 8000]},  # words are strings
    ],
)
def test_extra_args_must_be_a_list_of_words(extra):
    with pytest.raises(InventoryError, match="vllm_extra_args"):
        host_config({**LAB, **extra})


KEY = "sk-extra-args-4711"


@pytest.mark.parametrize(
    "words",
    [
        ["--api-key", KEY],
        ["--api-key=" + KEY],
        ["--api_key", KEY],
        ["--api_key=" + KEY],
        ["--API-KEY", KEY],
        ["--Api_Key=" + KEY],
        ["--api-k", KEY],  # argparse takes a unique prefix
        ["--api-ke=" + KEY],
        ["--api-", KEY],
        ["--disable-log-stats", "--api-key", KEY],
    ],
)
def test_api_key_in_extra_args_refused_in_any_spelling(words):
    cfg = lab(vllm_extra_args=words)
    with pytest.raises(ArgvError) as e:
        vllm_argv(cfg, stub_flag_available)
    assert KEY not in str(e.value) and "4711" not in str(e.value)
    for render in (sr.render_unit, sr.render_service):
        with pytest.raises(sr.RenderError) as e:
            render(cfg, stub_flag_available)
        assert KEY not in str(e.value) and "4711" not in str(e.value)
        assert KEY not in repr(e.value)


def test_real_vllm_facts_agrees_with_the_help_ground_truth():
    facts = pytest.importorskip("vfleet.config.vllm_facts")
    for cfg in (lab(tensor_parallel_size=2, gpu_memory_utilization=0.9, max_num_seqs=4), lab(**ENGINE, swap_space=4)):
        assert vllm_argv(cfg, facts.flag_available) == vllm_argv(cfg, stub_flag_available)
    # vLLM before 0.18 has no --shutdown-timeout: dropped, and TimeoutStopSec falls back
    r = vllm_argv(lab(vllm_version="0.5.4"), facts.flag_available)
    assert r.dropped == ["--shutdown-timeout"]
    assert sr.stop_timeout(lab(vllm_version="0.5.4"), facts.flag_available) == sr.STOP_TIMEOUT_DEFAULT_SEC


@pytest.mark.parametrize(
    "version, flag",
    [
        ("0.5.4", "--disable-log-requests"),
        ("0.12.0", "--no-enable-log-requests"),
        ("0.20.0", "--no-enable-log-requests"),
        ("0.32.0", "--no-enable-log-requests"),
    ],
)
def test_disable_log_requests_renders_the_spelling_the_version_takes(version, flag):
    """Accepted by the schema, it used to render nothing. 0.20.0 and 0.32.0 have no
    --disable-log-requests (their help captures list only --[no-]enable-log-requests)."""
    facts = pytest.importorskip("vfleet.config.vllm_facts")
    argv = vllm_argv(lab(vllm_version=version, disable_log_requests=True), facts.flag_available).argv
    assert [w for w in argv if "log-requests" in w] == [flag]
    if version in ("0.20.0", "0.32.0"):
        help_flags = _flags_from_help(HELP.with_name(f"vllm-{version}-help.txt"))
        assert flag in help_flags and "--disable-log-requests" not in help_flags
    assert not [w for w in argv_of(lab(vllm_version=version)) if "log-requests" in w]  # false: the default


def test_disable_log_requests_is_refused_where_the_version_takes_neither_spelling():
    cfg = lab(disable_log_requests=True)
    with pytest.raises(ArgvError) as exc:
        vllm_argv(cfg, FLAGS_0_32 - {"--no-enable-log-requests"})
    assert str(exc.value) == (
        "disable_log_requests: vLLM 0.32.0 takes neither --disable-log-requests nor "
        "--no-enable-log-requests; remove disable_log_requests from the inventory"
    )
    with pytest.raises(sr.RenderError, match="^disable_log_requests: "):
        sr.render_service(cfg, FLAGS_0_32 - {"--no-enable-log-requests"})
