"""vfleet/lab/guest.py's masking, on a scratch image root: a unit enabled on the machine image is masked
in a lab host, except those a deploy enables itself (DISABLE_ONLY: nginx, Prometheus, the nginx
exporter), which are only unlinked, because `systemctl enable` refuses a masked unit."""

from __future__ import annotations

import os
from pathlib import Path

from vfleet.lab.guest import DISABLE_ONLY, mask_services

WANTS = "etc/systemd/system/multi-user.target.wants"


def enable(root: Path, unit: str) -> None:
    (root / WANTS).mkdir(parents=True, exist_ok=True)
    (root / WANTS / unit).symlink_to(f"/lib/systemd/system/{unit}")


def test_deploy_managed_units_are_unlinked_not_masked(tmp_path):
    units = ["nginx.service", "prometheus.service", "prometheus-nginx-exporter.service", "postgresql.service"]
    for unit in units:
        enable(tmp_path, unit)
    assert set(units[:3]) <= DISABLE_ONLY
    masked = mask_services(tmp_path)
    assert "postgresql.service" in masked
    assert os.readlink(tmp_path / "etc/systemd/system/postgresql.service") == "/dev/null"
    for unit in units[:3]:
        assert unit not in masked
        assert not (tmp_path / WANTS / unit).is_symlink()
        assert not (tmp_path / "etc/systemd/system" / unit).is_symlink()


def test_a_unit_a_deploy_wrote_survives_a_restart_of_the_host(tmp_path):
    """A lab host restored after being killed keeps the vLLM unit deploy wrote into /etc (as a
    real host does across a reboot): masking it would leave a /dev/null link vfleet did not
    write, which the unit-name guard rightly refuses to overwrite."""
    unit = tmp_path / "etc/systemd/system/vllm.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("# Managed by vfleet (do not edit)\n[Service]\nExecStart=/bin/true\n")
    (tmp_path / WANTS).mkdir(parents=True)
    (tmp_path / WANTS / "vllm.service").symlink_to("/etc/systemd/system/vllm.service")
    enable(tmp_path, "postgresql.service")
    masked = mask_services(tmp_path)
    assert "vllm.service" not in masked and "postgresql.service" in masked
    assert not unit.is_symlink() and unit.read_text().startswith("# Managed by vfleet")
