"""shutdown_timeout has a default (30 s, which also sizes vfleet's own stop), so every host
holds one; vLLM takes --shutdown-timeout only from 0.18. An inventory that never set it asks
vLLM for nothing: neither the service step ("lacks --shutdown-timeout: not rendered") nor
preflight's vllm.flags check may warn about it on an older pin; one that set it is told."""

from __future__ import annotations

import pytest

from tests.unit.configs import host_config
from vfleet.config import vllm_facts
from vfleet.roles.preflight._version_checks import check_flags
from vfleet.roles.service import _render as sr
from vfleet.roles.service._argv import vllm_argv


@pytest.mark.parametrize("version", ["0.5.4", "0.17.1"])
def test_an_unset_shutdown_timeout_is_not_reported_on_an_older_pin(version):
    cfg = host_config({"vllm_version": version})
    r = vllm_argv(cfg, vllm_facts.flag_available)
    assert "--shutdown-timeout" not in r.argv and r.dropped == []
    assert sr.stop_timeout(cfg, vllm_facts.flag_available) == sr.STOP_TIMEOUT_DEFAULT_SEC  # no drain to wait for
    assert check_flags(cfg, {}).status == "pass"


@pytest.mark.parametrize("value", [30, 120])
def test_a_shutdown_timeout_the_inventory_set_is_reported_on_an_older_pin(value):
    cfg = host_config({"vllm_version": "0.17.1", "shutdown_timeout": value})
    assert sr.render_service(cfg, vllm_facts.flag_available).dropped_flags == ["--shutdown-timeout"]
    c = check_flags(cfg, {})
    assert c.status == "warn" and "--shutdown-timeout (shutdown_timeout) needs vLLM >= 0.18.0" in c.message


def test_the_default_still_drains_where_vllm_can():
    cfg = host_config({"vllm_version": "0.18.0"})
    r = vllm_argv(cfg, vllm_facts.flag_available)
    assert r.argv[r.argv.index("--shutdown-timeout") + 1] == "30" and r.dropped == []
    assert sr.stop_timeout(cfg, vllm_facts.flag_available) == 30 + sr.STOP_TIMEOUT_MARGIN_SEC
