"""vllm_extra_args and vllm_env against what vfleet manages, the pinned vLLM's own flag list,
secrets and the protection-widening features (vfleet/config/extra_args.py): every spelling
vLLM's parser accepts for a flag is read as that flag, and refused with the variable to set.

Configs are real HostConfigs (tests/unit/configs.py: the inventory loader and schema)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tests.unit.configs import host_config
from tests.unit.service_cases import ENGINE, LAB, lab
from vfleet.config import vllm_facts
from vfleet.config.extra_args import _NOT_MODELLED, _SECRET_FLAGS, check_extra_args, fleet_errors, unsafe_warnings
from vfleet.config.managed_flags import REPLICA, managed_flags
from vfleet.config.unsafe_features import UNSAFE_FEATURES
from vfleet.config.vllm_flags import captured_versions, flag_list
from vfleet.roles.service._argv import ArgvError, vllm_argv

CAPTURED = "0.32.0"
UNCAPTURED = "0.31.0"  # no help capture: refused only by the managed / secret / unsafe rules
SECRET = "sk-extra-VALUE-4711"


def errors(version: str = CAPTURED, **variables) -> list[str]:
    return check_extra_args(host_config({**LAB, "vllm_version": version, **variables}))


def extra(words: list[str], version: str = CAPTURED, **variables) -> list[str]:
    return errors(version, vllm_extra_args=words, **variables)


# --- the managed flags: one table, every spelling --------------------------------------------


def _spellings(flag: str) -> list[str]:
    """What argparse and vLLM's FlexibleArgumentParser take for `flag`: itself, =value, `_`
    for `-`, upper case, and its shortest unique prefix in vLLM 0.32.0."""
    out = [flag, f"{flag}=1", "--" + flag[2:].replace("-", "_"), flag.upper()]
    options = flag_list(CAPTURED).options
    for n in range(4, len(flag)):
        if [o for o in options if o.startswith(flag[:n])] == [flag]:
            out.append(flag[:n])
            break
    return out


PRESENT = sorted(f for f in managed_flags() if f in flag_list(CAPTURED).options)


@pytest.mark.parametrize("flag", PRESENT)
def test_every_managed_flag_is_refused_in_every_spelling_with_its_variable(flag):
    variable = managed_flags()[flag]
    for word in _spellings(flag):
        for version in (CAPTURED, UNCAPTURED):
            got = extra([word, "1"], version)
            assert (
                len(got) == 1
                and "is managed by vfleet; set " + variable + " instead" in got[0]
                or "does not accept" in got[0]
            ), (word, version, got)
            assert got[0].startswith("vars.vllm_extra_args: "), got


@pytest.mark.parametrize(
    "words, variable",
    [
        (["-tp", "2"], "tensor_parallel_size"),
        (["-tp=2"], "tensor_parallel_size"),
        (["-t", "2"], "tensor_parallel_size"),
        (["-pp", "2"], "pipeline_parallel_size"),
        (["-q", "awq"], "quantization"),
        (["-qawq"], "quantization"),
        (["--device-memory-utilization", "0.5"], "gpu_memory_utilization"),  # an alias of another name
        (["--no-enable-prefix-caching"], "enable_prefix_caching"),
        (["--no-trust-remote-code"], "trust_remote_code"),
        (["--no-enable-log-requests"], "disable_log_requests"),
        (["--model", "/x"], "model_name or model_path"),
        (["--max-model", "9"], "max_model_len"),
        (["--served_model_name=x"], "served_model_name"),
        (["--nnodes", "2"], "replica"),
        (["--headless"], "replica"),
        (["--master-port", "1"], "replica_master_port"),
    ],
)
def test_short_aliases_prefixes_and_negative_forms_are_the_flag_they_set(words, variable):
    for version in (CAPTURED, UNCAPTURED):
        got = extra(words, version)
        assert got and f"set {variable}" in got[0], (version, got)


def test_every_flag_vllm_argv_renders_is_in_the_managed_table():
    """The guard that makes _argv.py and managed_flags.py one place: a config that renders every
    flag, the replica renderer's own flags, and the log-requests spelling of old and new vLLM."""
    managed = managed_flags()
    cfg = host_config(
        {
            **LAB,
            **ENGINE,
            "enable_chunked_prefill": False,
            "kv_cache_memory_bytes": 2**30,
            "chat_template": "/srv/t.jinja",
            "swap_space": 4,
            "disable_log_requests": True,
            "max_num_seqs": 8,
        }
    )
    for version in ("0.5.4", "0.32.0"):
        cfg_v = host_config(
            {
                **LAB,
                **ENGINE,
                "vllm_version": version,
                "disable_log_requests": True,
                "swap_space": 4,
                "chat_template": "/srv/t.jinja",
            }
        )
        for c in (cfg, cfg_v):
            argv = vllm_argv(c, lambda f, v: True).argv
            rendered = {w for w in argv if w.startswith("--")}
            assert rendered - set(managed) == set(), rendered - set(managed)
    source = (Path(__file__).parents[2] / "vfleet" / "roles" / "replica" / "_ray_render.py").read_text()
    block = source[source.index("def _vllm_config") : source.index("def _headless_start")]
    assert set(re.findall(r'"(--[a-z-]+)"', block)) == set(REPLICA)


def test_every_flag_the_rules_name_is_one_vllm_has_or_had():
    """A typo in a table would silently refuse nothing: each flag is in a captured help or in the
    facts table (flags a release removed, such as --swap-space)."""
    known = set(flag_list(UNCAPTURED).options) | {r["flag"] for r in vllm_facts.data()["flags"]}
    named = set(managed_flags()) | set(_NOT_MODELLED) | set(_SECRET_FLAGS)
    named |= {f for feature in UNSAFE_FEATURES.values() for f in feature.flags}
    assert named - known == set()
    assert captured_versions() == ["0.20.0", "0.32.0"] and flag_list("0.32.0+cpu").authoritative


# --- secrets ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "words, variable",
    [
        (["--api-key", SECRET], "api_key"),
        ([f"--api_key={SECRET}"], "api_key"),
        (["--API-KEY", SECRET], "api_key"),
        (["--api-k", SECRET], "api_key"),
        ([f"--api-key {SECRET}"], "api_key"),
        (["--api-", SECRET], "api_key"),
        (["--hf-token", SECRET], "hf_token"),
        ([f"--hf_token={SECRET}"], "hf_token"),
        (["--hf-tok", SECRET], "hf_token"),
        (["--api-key", "k1", "-" + SECRET], "api_key"),  # a value that looks like an option is not echoed either
        (["--api-key" + SECRET], "api_key"),
        (["--HF_TOKEN" + SECRET], "hf_token"),  # glued to the flag
    ],
)
def test_a_secret_flag_names_the_secret_variable_and_never_its_value(words, variable):
    for version in (CAPTURED, "0.20.0", UNCAPTURED):
        got = extra(words, version)
        assert got and f"set {variable}" in got[0] and "(0600)" in got[0], got
        assert not [e for e in got if "VALUE" in e or "k1" in e], got


@pytest.mark.parametrize("flag", ["--s3-secret-access-key", "--db-password", "--auth-token", "--webhook_secret"])
def test_any_flag_named_like_a_secret_is_refused_without_its_value(flag):
    got = extra([flag, SECRET], UNCAPTURED)
    assert got and "looks like a secret" in got[0] and "vllm_env" in got[0] and SECRET not in " ".join(got)


def test_flags_that_merely_mention_tokens_are_not_secrets():
    assert extra(["--max-logprobs", "4", "--tokenizer-mode", "auto", "--enable-prompt-tokens-details"]) == []


# --- what vfleet does not model, the version's own list ---------------------------------------


@pytest.mark.parametrize(
    "words",
    [
        ["--config", "/etc/v.yaml"],
        ["--config=/etc/v.yaml"],
        ["--uds", "/run/v.sock"],
        ["--ssl-keyfile", "/k"],
        ["--grpc"],
        ["-dp", "2"],
        ["--data_parallel_size=2"],
    ],
)
def test_flags_that_move_the_server_out_of_vfleets_view_are_refused(words):
    for version in (CAPTURED, UNCAPTURED):
        got = extra(words, version)
        assert got and "is refused: " in got[0], (version, got)


def test_unknown_flags_are_refused_where_the_release_is_captured_only():
    assert extra(["--no-such-flag"]) == ["vars.vllm_extra_args: vLLM 0.32.0 does not accept --no-such-flag"]
    assert extra(["--no-such-flag"], "0.20.0") == ["vars.vllm_extra_args: vLLM 0.20.0 does not accept --no-such-flag"]
    assert extra(["--no-such-flag"], UNCAPTURED) == []
    # a flag the facts table knows a release lacks, captured or not
    assert "does not accept --shutdown-timeout (added in 0.18.0)" in extra(["--shutdown-timeout", "5"], "0.11.0")[0]
    assert "ambiguous" in extra(["--max-num", "3"])[0]


def test_what_vllm_accepts_and_vfleet_does_not_manage_passes():
    words = [
        "--disable-log-stats",
        "--max_logprobs=8",
        "-O3",
        "--compilation-config.mode",
        "3",
        "-cc.cudagraph_mode=none",
        "--no-enable-log-outputs",
        "--tokenizer-mode",
        "auto",
        "--seed",
        "-1",
    ]
    assert extra(words) == [] and extra(words, UNCAPTURED) == []


def test_odd_words_are_refused_with_the_fix():
    assert "two items" in extra(["--swap-space 4"], "0.5.4")[0] or "managed" in extra(["--swap-space 4"], "0.5.4")[0]
    assert "two items" in extra(["--seed 4"])[0]
    assert "bare '--'" in extra(["--", "--port", "1"])[0]


# --- unsafe features --------------------------------------------------------------------------

FEATURE_FLAGS = [(name, flag) for name, f in UNSAFE_FEATURES.items() for flag in f.flags]
FEATURE_ENV = [(name, key) for name, f in UNSAFE_FEATURES.items() for key in f.env]


@pytest.mark.parametrize("feature, flag", FEATURE_FLAGS)
def test_an_unsafe_flag_needs_its_feature_in_vllm_allow_unsafe(feature, flag):
    version = CAPTURED if flag in flag_list(CAPTURED).options else UNCAPTURED
    got = extra([flag, "x"], version)
    assert len(got) == 1 and f"add '{feature}' to vllm_allow_unsafe" in got[0] and "docs/security.md" in got[0]
    assert extra([flag, "x"], version, vllm_allow_unsafe=[feature]) == []
    cfg = host_config({**LAB, "vllm_version": version, "vllm_extra_args": [flag, "x"], "vllm_allow_unsafe": [feature]})
    assert [w for w in unsafe_warnings(cfg) if w.startswith(f"vllm_allow_unsafe: {feature} ({flag})")]
    other = next(n for n in UNSAFE_FEATURES if n != feature)
    assert extra([flag, "x"], version, vllm_allow_unsafe=[other]) == got  # another feature is no opt-in


@pytest.mark.parametrize("feature, key", FEATURE_ENV)
def test_an_unsafe_environment_variable_needs_its_feature_in_vllm_allow_unsafe(feature, key):
    for on in ("1", "true", "True ", "yes", "2", "/srv/x"):
        got = errors(vllm_env={key: on})
        assert len(got) == 1 and got[0].startswith(f"vars.vllm_env: {key} widens") and f"'{feature}'" in got[0], got
        assert errors(vllm_env={key: on}, vllm_allow_unsafe=[feature]) == []
    for off in ("0", "false", ""):
        assert errors(vllm_env={key: off}) == []


def test_negative_forms_of_unsafe_switches_are_safe():
    assert (
        extra(["--no-enable-tokenizer-info-endpoint", "--no-allow-credentials", "--no-trust-request-chat-template"])
        == []
    )


def test_trust_remote_code_is_its_own_opt_in_and_warns():
    cfg = host_config({**LAB, "trust_remote_code": True})
    assert check_extra_args(cfg) == []
    assert unsafe_warnings(cfg) == ["trust_remote_code: the model folder's own Python code runs in the service"]
    assert unsafe_warnings(host_config(LAB)) == []


# --- environment vfleet writes, the fleet's errors, the render-time check ---------------------


def test_environment_vfleet_writes_from_a_variable_is_refused():
    assert errors(vllm_env={"CUDA_VISIBLE_DEVICES": "0"}) == [
        "vars.vllm_env: CUDA_VISIBLE_DEVICES is managed by vfleet; set cuda_visible_devices instead"
    ]
    assert errors(vllm_env={"OMP_NUM_THREADS": "4", "NCCL_DEBUG": "INFO"}) == []


def test_fleet_errors_name_each_problem_once_with_its_hosts():
    bad = [host_config({**LAB, "vllm_extra_args": ["--port", "1"]}, name=f"gpu{i:02d}") for i in range(7)]
    good = host_config(LAB, name="ok")
    assert fleet_errors([*bad, good]) == [
        "hosts gpu00, gpu01, gpu02, gpu03, gpu04 and 2 more: vars.vllm_extra_args: --port is managed by vfleet; "
        "set vllm_port instead"
    ]
    assert fleet_errors([good]) == []


def test_vllm_argv_refuses_the_same_and_lets_a_replica_members_own_flags_through():
    with pytest.raises(ArgvError, match="--port is managed by vfleet"):
        vllm_argv(lab(vllm_extra_args=["--port", "1"]), lambda f, v: True)
    with pytest.raises(ArgvError, match="'dev_mode'"):
        vllm_argv(lab(vllm_env={"VLLM_SERVER_DEV_MODE": "1"}), lambda f, v: True)
    member = lab(replica="r1", vllm_extra_args=["--distributed-executor-backend", "ray", "--enforce-eager"])
    with pytest.raises(ArgvError, match="set enforce_eager"):  # the inventory's own words still are
        vllm_argv(member, lambda f, v: True)
    member = lab(
        replica="r1",
        vllm_extra_args=["--distributed-executor-backend", "mp", "--nnodes", "2", "--node-rank", "1", "--headless"],
    )
    assert vllm_argv(member, lambda f, v: True).argv[-1] == "--headless"
    assert check_extra_args(member) != []  # but not at inventory load, where no renderer added them


# --- property: no spelling of a managed or secret flag gets through ----------------------------


@settings(max_examples=300, deadline=None)
@given(flag=st.sampled_from(PRESENT + sorted(_SECRET_FLAGS)), data=st.data())
def test_no_spelling_of_a_managed_or_secret_flag_gets_through(flag, data):
    """Upper/lower case per letter, `_` or `-`, any prefix argparse would still resolve, with or
    without `=value`: always refused, and the value never shown."""
    options = flag_list(CAPTURED).options
    cut = data.draw(st.integers(min_value=3, max_value=len(flag)))
    prefix = flag[:cut]
    resolves = [o for o in options if o.startswith(prefix)]
    spelled = "--" + "".join(
        data.draw(st.sampled_from([ch.lower(), ch.upper()]))
        if ch.isalpha()
        else data.draw(st.sampled_from(["-", "_"]))
        if ch == "-"
        else ch
        for ch in prefix[2:]
    )
    word = spelled + data.draw(st.sampled_from(["", "=" + SECRET]))
    for version in (CAPTURED, UNCAPTURED):
        got = extra([word, SECRET], version)
        if len({options[o] for o in resolves}) == 1 or flag in _SECRET_FLAGS:
            assert got, (word, version)
        assert SECRET not in " ".join(got) and "VALUE" not in " ".join(got)


def test_preflight_names_extra_flags_as_vllm_reads_them():
    """The flags audit (vllm.flags) reads extra args with the same reader: a short alias or a
    glued value names its flag, and the rendered variables come from the managed table."""
    from vfleet.roles.preflight._version_checks import inventory_flags

    cfg = host_config(
        {
            **LAB,
            "vllm_version": "0.5.4",
            "vllm_extra_args": ["-O3", "--swap-space 4", "--seed=1"],
            "kv_cache_memory_bytes": 2**30,
        }
    )
    flags = inventory_flags(cfg)
    assert flags["--optimization-level"] == "vllm_extra_args.-O" and flags["--seed"] == "vllm_extra_args.--seed"
    assert flags["--swap-space"] == "vllm_extra_args.--swap-space"
    assert flags["--kv-cache-memory-bytes"] == "kv_cache_memory_bytes"  # not in the old var_flags list
