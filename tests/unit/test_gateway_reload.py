"""The gateway's reload is checked (vfleet/roles/gateway/_reload.py): nginx serves the id of the
config it runs on loopback, and the reload command waits for the new id, failing with nginx's
words when the master kept the old config (a refused reload that `systemctl reload` reports as
success). Run here with `systemctl reload nginx` replaced by `true` against a real nginx."""

from __future__ import annotations

import dataclasses
import subprocess
import urllib.request

from tests.unit.gateway_cases import gw
from tests.unit.test_gateway_render import _free_port, _nginx_prefix, needs_nginx
from vfleet.roles.gateway import _reload as reload
from vfleet.roles.gateway._files import render_files
from vfleet.roles.gateway._render import CONFIG_ID_PATH, Backend


def _wait_only(status_port: int, config_id: str, reload_as: str = "true") -> subprocess.CompletedProcess:
    command = reload.reload_command(status_port, config_id).replace("systemctl reload nginx", reload_as, 1)
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)


def test_every_change_of_a_file_changes_the_id():
    bs = [Backend("a1", "10.0.0.1", 8000, "a")]
    base = render_files(bs, gw())
    assert base.config_id and base.config_id in base.conf.content and len(base.config_id) == 16
    assert render_files(bs, gw()).config_id == base.config_id  # stable
    assert render_files(bs, gw(), drained={"a1"}).config_id != base.config_id  # the conf
    other = dataclasses.replace(bs[0], max_tokens=5)
    assert render_files([other], gw()).config_id != base.config_id  # the module too


@needs_nginx
def test_the_wait_passes_on_the_new_id_and_fails_with_nginx_words_on_the_old(tmp_path, monkeypatch):
    status_port = _free_port()
    cfg = gw(
        {
            "gateway_port": _free_port(),
            "gateway_listen_address": "127.0.0.1",
            "monitoring_gateway_status_port": status_port,
        }
    )
    files = render_files([Backend("a1", "127.0.0.1", _free_port(), "a")], cfg)
    conf = _nginx_prefix(tmp_path, files, daemon=True)
    subprocess.run(["nginx", "-p", str(tmp_path), "-c", str(conf)], check=True, timeout=30)
    try:
        served = urllib.request.urlopen(f"http://127.0.0.1:{status_port}{CONFIG_ID_PATH}", timeout=5).read()
        assert served.decode().strip() == files.config_id
        assert _wait_only(status_port, files.config_id).returncode == 0
        monkeypatch.setattr(reload, "RELOAD_WAIT_S", 1)
        monkeypatch.setattr(reload, "ERROR_LOG", str(tmp_path / "error.log"))
        log = tmp_path / "error.log"
        log.write_text("[emerg] an older refusal, not this reload's\n")
        refusal = '[emerg] limit_req "z" uses the "$a" key while previously it used "$b"'
        r = _wait_only(status_port, "0123456789abcdef", reload_as=f"echo '{refusal}' >> {log}")
        assert r.returncode == 1
        assert r.stderr.strip() == f"nginx kept its previous config (the reload was refused): {refusal}", r.stderr
    finally:
        subprocess.run(["nginx", "-p", str(tmp_path), "-c", str(conf), "-s", "stop"], timeout=30)
