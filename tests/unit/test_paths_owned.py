"""Only what vfleet made is replaced or removed on a host: the proofs of
vfleet/engine/owned_paths.py from a table, the weights' and venvs' links and folders built on
them, and the venv removal run for real under sh."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from tests.unit.configs import host_config
from vfleet.config.lora import LoraAdapter
from vfleet.engine.errors import VfleetError
from vfleet.engine.facts import FileState
from vfleet.engine.owned_paths import deep_path, inside, owned_symlink_change, replaceable_link
from vfleet.engine.runner import HostFailed
from vfleet.roles.install import _venv as venv
from vfleet.roles.model_source._payload import adapter_payload, model_payload
from vfleet.roles.weights import _copies as copies

# (link, its current target as readlink prints it (None: missing, OTHER: not a link), root, refused?)
LINKS = [
    ("/bin", "usr/bin", "/srv/models", "top-level path"),  # Debian's /bin: never
    ("/lib64", "usr/lib64", "/", "top-level path"),
    ("/usr/lib64", "lib", "/srv/models", "outside /srv/models"),  # a system link, deep enough
    ("/usr/local/bin", "OTHER", "/srv/models", "not a symlink"),
    ("/srv/models/tiny", "/etc", "/srv/models", "outside /srv/models"),
    ("/srv/models/tiny", "../../etc", "/srv/models", "outside /srv/models"),
    ("/srv/models/tiny", "/srv/models", "/srv/models", "outside /srv/models"),
    ("/srv/models/tiny", "/srv/models-other/x", "/srv/models", "outside /srv/models"),
    ("/srv/models/tiny", None, "/srv/models", None),
    ("/srv/models/tiny", "/srv/models/.versions/tiny-abc", "/srv/models", None),
    ("/srv/models/tiny", ".versions/tiny-abc", "/srv/models", None),  # relative: from the link's folder
    ("/data/llama", "/srv/models/.versions/tiny-abc", "/srv/models", None),  # model_path outside model_dir
]


@pytest.mark.parametrize("link,current,root,refused", LINKS)
def test_replaceable_link(link, current, root, refused):
    if refused is None:
        replaceable_link(link, current, root, "model_path")
    else:
        with pytest.raises(HostFailed, match=refused) as e:
            replaceable_link(link, current, root, "model_path")
        assert "\n" not in str(e.value) and "model_path" in str(e.value)


@pytest.mark.parametrize(
    "root,path,ok",
    [
        ("/srv/models/.versions", "/srv/models/.versions/tiny-abc", True),
        ("/srv/models/.versions", "/srv/models/.versions/org/tiny-abc", True),
        ("/srv/models/.versions", "/srv/models/.versions/../../../etc-abc", False),
        ("/srv/models/.versions", "/srv/models/.versions", False),
        ("/srv/models/.versions", "/srv/models/.versions-evil/x", False),
        ("/opt/vllm", "relative/x", False),
        ("/", "/usr", False),
        ("/opt", "/opt/x", True),
    ],
)
def test_inside(root, path, ok):
    if ok:
        assert inside(root, path, "x") == path
    else:
        with pytest.raises(HostFailed):
            inside(root, path, "x")


def test_deep_path():
    assert deep_path("/srv/models/tiny/", "model_path") == "/srv/models/tiny"
    for bad in ("/bin", "/", "/usr/../bin", "srv/models"):
        with pytest.raises(HostFailed, match="model_path"):
            deep_path(bad, "model_path")


def test_owned_symlink_change_also_proves_the_new_target():
    with pytest.raises(HostFailed, match="target"):
        owned_symlink_change("/opt/vllm/current", "/usr", None, root="/opt/vllm", what="vllm_root")
    [change] = owned_symlink_change(
        "/opt/vllm/current", "/opt/vllm/v1", "/opt/vllm/v0", root="/opt/vllm", what="vllm_root"
    )
    assert "ln -sfn -- /opt/vllm/v1" in change.command


# --- the weights ---------------------------------------------------------------------------


def test_a_model_path_naming_a_system_symlink_fails_the_host():
    # The schema refuses a system folder at load; the host-side proof is the second wall for a
    # config that got past it (built in code), so it is fed one directly.
    with pytest.raises(VfleetError, match="vars.model_path: .* got '/bin', which is a system folder"):
        host_config({"model_path": "/bin"})
    cfg = dataclasses.replace(host_config(), model_path="/bin")
    with pytest.raises(HostFailed, match="model_path '/bin' is a top-level path"):
        copies.copy_paths(model_payload(cfg), "a" * 64)
    cfg = dataclasses.replace(host_config(), model_path="/usr/lib64")
    live, version, _ = copies.copy_paths(model_payload(cfg), "a" * 64)
    with pytest.raises(HostFailed, match="symlink to lib, outside /srv/models"):
        copies.switch_change(model_payload(cfg), live, version, "lib")
    # A system symlink deep enough for the schema (Debian's alternatives) only the host can see.
    cfg = host_config({"model_path": "/etc/alternatives/java"})
    live, version, _ = copies.copy_paths(model_payload(cfg), "a" * 64)
    with pytest.raises(HostFailed, match="symlink to /usr/lib/jvm/java-17/bin/java, outside /srv/models"):
        copies.switch_change(model_payload(cfg), live, version, "/usr/lib/jvm/java-17/bin/java")


def test_a_model_name_that_climbs_out_of_model_dir_fails_the_host():
    cfg = dataclasses.replace(host_config(), model_name="../../../etc")
    with pytest.raises(HostFailed, match="is not inside /srv/models/.versions"):
        copies.copy_paths(model_payload(cfg), "a" * 64)


def test_the_weights_switch_their_own_link():
    cfg = host_config()
    live, version, staging = copies.copy_paths(model_payload(cfg), "a" * 64)
    assert (live, version, staging) == (
        "/srv/models/tiny",
        "/srv/models/.versions/tiny-aaaaaaaaaaaa",
        "/srv/models/.staging/tiny-aaaaaaaaaaaa",
    )
    [change] = copies.switch_change(model_payload(cfg), live, version, "/srv/models/.versions/tiny-bbbbbbbbbbbb")
    assert change.target == live


def test_an_adapter_lives_in_lora_beside_the_model_and_cannot_climb_out():
    cfg = host_config()
    live, version, staging = copies.copy_paths(adapter_payload(cfg, LoraAdapter("alpha", "/src/alpha")), "a" * 64)
    assert (live, version, staging) == (
        "/srv/models/lora/alpha",
        "/srv/models/.versions/lora-alpha-aaaaaaaaaaaa",
        "/srv/models/.staging/lora-alpha-aaaaaaaaaaaa",
    )
    # the schema's name pattern refuses '/', the host-side proof holds for a name built in code
    with pytest.raises(HostFailed, match=r"lora_adapters\[../../../etc\] .* is a top-level path"):
        copies.copy_paths(adapter_payload(cfg, LoraAdapter("../../../etc", "/src/x")), "a" * 64)


# --- venvs ---------------------------------------------------------------------------------


def test_a_venv_name_that_climbs_out_of_vllm_root_fails_the_host():
    with pytest.raises(VfleetError, match="vars.vllm_venv_name: .* which has a '/'"):
        host_config({"vllm_venv_name": "../../usr"})
    cfg = dataclasses.replace(host_config(), venv_name="../../usr")  # past the schema: the second wall
    with pytest.raises(HostFailed, match="not inside /opt/vllm"):
        venv.install_change(cfg, cfg.venv_path)


def test_current_and_previous_are_replaced_only_when_vfleet_made_them():
    cfg = host_config()
    facts = {
        "root": FileState("dir", mode="755"),
        "marker": FileState("missing"),
        "current": "/usr/bin",
        "previous": None,
    }
    with pytest.raises(HostFailed, match="vllm_root /opt/vllm/current is a symlink to /usr/bin"):
        venv.plan(cfg, facts)
    facts = {**facts, "current": "/opt/vllm/vllm-0.31.0", "previous": "/etc"}
    with pytest.raises(HostFailed, match="vllm_root /opt/vllm/previous is a symlink to /etc"):
        venv.plan(cfg, facts)
    facts = {**facts, "previous": "/opt/vllm/vllm-0.30.0"}
    assert [c.target for c in venv.plan(cfg, facts) if c.action == "symlink"] == [
        "/opt/vllm/previous",
        "/opt/vllm/current",
    ]


@pytest.mark.parametrize(
    "setup,rc,kept",
    [
        ("missing", 0, False),
        ("empty", 0, False),
        ("venv", 0, False),  # pyvenv.cfg: a venv (vfleet's, half built or not)
        ("marker", 0, False),
        ("foreign", 3, True),  # someone's folder: refused, untouched
        ("link", 3, True),  # a symlink (to a system folder, say): refused
    ],
)
def test_the_venv_is_removed_only_when_vfleet_made_it(tmp_path, setup, rc, kept):
    v = tmp_path / "root" / "vllm-0.32.0"
    v.parent.mkdir()
    outside = tmp_path / "system"
    outside.mkdir()
    (outside / "sh").write_text("precious")
    if setup == "empty":
        v.mkdir()
    elif setup in ("venv", "marker", "foreign"):
        v.mkdir()
        (v / {"venv": "pyvenv.cfg", "marker": venv.MARKER, "foreign": "data"}[setup]).write_text("x")
        (v / "bin").mkdir()
    elif setup == "link":
        v.symlink_to(outside)
    r = subprocess.run(["sh", "-c", "set -e; " + venv._clear_venv(str(v)) + "true"], capture_output=True, text=True)
    assert r.returncode == rc, r.stderr
    assert (v.exists() or v.is_symlink()) is kept
    assert (outside / "sh").read_text() == "precious"
    assert not (tmp_path / "root" / "vllm-0.32.0.vfleet-old").exists()
    if rc:
        assert "is not a venv vfleet made" in r.stderr


@pytest.mark.parametrize("root", ["/tmp", "/usr", "/", "/usr/.."])
def test_a_top_level_vllm_root_is_refused_before_its_mode_changes(root):
    """Past the schema (which refuses these first, below): the plan itself must refuse."""
    facts = {"root": FileState("dir", mode="1777"), "marker": FileState("missing"), "current": None, "previous": None}
    with pytest.raises(HostFailed, match="vllm_root"):
        venv.plan(dataclasses.replace(host_config(), vllm_root=root), facts)


@pytest.mark.parametrize("root", ["/tmp", "/usr", "/", "/usr/.."])
def test_the_schema_refuses_a_top_level_vllm_root_first(root):
    with pytest.raises(VfleetError, match="vars.vllm_root: expected"):
        host_config({"vllm_root": root})
