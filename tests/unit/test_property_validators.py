"""The property suite's validators can fail: each rejects a file its consumer would reject (or
mis-read), so a green property run means the real tools accepted every rendered file."""

from __future__ import annotations

from tests.unit.property_run import cli, judge_cli
from tests.unit.property_validators import (
    bash_check,
    env_file_values,
    nginx_check,
    promtool_check,
    run_checks,
    units_check,
)


def test_nginx_check_rejects_a_split_argument_and_stands_in_only_for_meant_host_names(tmp_path):
    rendered = tmp_path / "etc" / "nginx"
    conf = rendered / "conf.d" / "gw.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(
        "upstream u { server gpu.invalid:8000 max_fails=1; }\nserver { listen 127.0.0.1:1; server_name a b;c; }\n"
    )
    (failure,) = run_checks([nginx_check(tmp_path / "p1", rendered, {"gpu.invalid:8000"})])
    assert "nginx -t" in failure and '"c"' in failure
    conf.write_text("upstream u { server gpu.invalid:8000 max_fails=1; }\n")
    assert run_checks([nginx_check(tmp_path / "p2", rendered, {"gpu.invalid:8000"})]) == []
    assert run_checks([nginx_check(tmp_path / "p3", rendered, {"other:8000"})]) != []


def test_nginx_check_reads_the_files_the_config_names_with_njs_loaded(tmp_path):
    """The gateway's conf imports vfleet/gateway.js (relative to nginx's folder): a module that
    does not compile, or is not there, fails the check."""
    rendered = tmp_path / "etc" / "nginx"
    (rendered / "conf.d").mkdir(parents=True)
    (rendered / "vfleet").mkdir()
    # (njs compiles a module for the servers that can use it: one is needed)
    (rendered / "conf.d" / "gw.conf").write_text(
        "js_import m from vfleet/m.js;\njs_set $x m.f;\nserver { listen 127.0.0.1:1; location / { return 200 $x; } }\n"
    )
    (rendered / "vfleet" / "m.js").write_text("function f(r) { return 'x'; }\nexport default {f};\n")
    assert run_checks([nginx_check(tmp_path / "p1", rendered, set())]) == []
    (rendered / "vfleet" / "m.js").write_text("function f(r) { return 'x' }}\nexport default {f};\n")
    (failure,) = run_checks([nginx_check(tmp_path / "p2", rendered, set())])
    assert "nginx -t" in failure and 'SyntaxError: Unexpected token "}"' in failure, failure
    (rendered / "vfleet" / "m.js").unlink()
    (failure,) = run_checks([nginx_check(tmp_path / "p3", rendered, set())])
    assert 'Cannot find module "vfleet/m.js"' in failure, failure


def test_units_check_fails_on_what_systemd_ignores_and_on_an_unmeant_missing_binary(tmp_path):
    unit = tmp_path / "x.service"
    unit.write_text("[Service]\nExecStart=/nonexistent/bin/vllm serve\nKillMode=bogus\n")
    assert run_checks([units_check([unit], {"/nonexistent/bin/vllm"})]) != []  # KillMode= ignored
    unit.write_text("[Service]\nExecStart=/nonexistent/bin/vllm serve\n")
    assert run_checks([units_check([unit], {"/nonexistent/bin/vllm"})]) == []
    assert run_checks([units_check([unit], {"/other/bin/vllm"})]) != []
    unit.write_text('[Service]\nExecStart=/nonexistent/bin/vllm "serve\n')
    assert run_checks([units_check([unit], {"/nonexistent/bin/vllm"})]) != []


def test_env_file_values_reads_like_systemd_and_sh(tmp_path):
    good, bad = tmp_path / "good.env", tmp_path / "bad.env"
    good.write_text("# c\nA='x y $z'\nB=plain\n")
    bad.write_text('A="x`id`"\nB=a b\n')
    (gs, gsh), (bs, bsh) = env_file_values([good, bad])
    assert gs == gsh == {"A": "x y $z", "B": "plain"}
    assert bs != bsh  # systemd keeps `id` literally and takes "a b"; sh does neither


def test_promtool_and_bash_checks_fail_on_broken_input(tmp_path):
    (tmp_path / "prometheus.yml").write_text("global:\n  scrape_interval: 5m\\n\n")
    script = tmp_path / "c.sh"
    script.write_text("echo 'unclosed\n")
    failures = run_checks([promtool_check(tmp_path), bash_check(script)])
    assert [f.split(":")[0] for f in failures] == ["promtool check config", "bash -n"]


def test_judge_cli_wants_one_line_errors_and_no_secret():
    assert judge_cli("x", 2, "", "warning: w\nerror: e\n") == []
    assert judge_cli("x", 2, "", "error: e\ncontinued\n") != []
    assert judge_cli("x", 2, "", "error: e \x1b[31m\n") != []
    assert judge_cli("x", 0, "Zq7PROPSECRET\n", "") != []
    assert judge_cli("x", 1, "", "") != []


def test_cli_runs_in_this_process_and_reports_exit_2():
    code, out, err = cli("render", "--inventory", "/nonexistent/inventory.yaml")
    assert code == 2 and err.startswith("error: ") and judge_cli("render", code, out, err) == []


def test_removed_paths_reads_rm_targets_as_the_shell_splits_them():
    from tests.unit.property_fleet import removed_paths

    assert removed_paths("set -e; rm -rf -- '/opt/v b/../..'; /usr/bin/python3 -m venv -- x") == ["/opt/v b/../.."]
    assert removed_paths("rm -f /a && ln -s /b /c; rm -rf -- /d/e") == ["/a", "/d/e"]
    assert removed_paths("echo 'unbalanced") == []
