"""What a host's overlay gets before it boots: identity, SSH, names, masked services.

WHY before boot: the overlay shows everything installed on this machine, including its
identity (machine id, SSH host keys, root's keys) and its enabled services (postgresql,
nginx, timers). A lab host must look like a distinct, minimal server, so each of those is
replaced or masked in the overlay's upper layer, never on the machine itself."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from vfleet.lab.system import run

# Units a lab host runs from the machine image's enabled set; everything else enabled on
# the image is masked. journald and logind/dbus are static (vendor) units, not touched.
KEEP_ENABLED = {"ssh.service", "sshd.service", "systemd-networkd.service"}
# Installed but left disabled (deploy enables them): unlinked from .wants, not masked,
# because `systemctl enable` refuses a masked unit.
DISABLE_ONLY = {
    "nginx.service",
    "prometheus.service",
    "prometheus-nginx-exporter.service",
    "prometheus-node-exporter.service",
    "mtail.service",
}
# Vendor units that cannot work inside a container on this machine and would only turn
# `systemctl is-system-running` into "degraded".
ALWAYS_MASK = [
    "systemd-timesyncd.service",
    "e2scrub_reap.service",
    "systemd-pstore.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "man-db.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
    "getty@tty1.service",
    "console-getty.service",
    # nspawn mounts the root; remounting it per fstab has nothing to do here and
    # failed now and then with 20 hosts booting at once on 2 cores.
    "systemd-remount-fs.service",
]
SSHD_DROPIN = """# vfleet lab: this host's own key only (the machine's keys are hidden), keys only.
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
"""


# root's user manager (started by pam_systemd at each SSH login) now and then hung in its
# stop job at shutdown on this machine's cgroup v1 hierarchy ("Failed to kill control
# group ... Input/output error"), which held `down` for 30 s; nothing in the lab needs it
# to linger.
USER_UNIT_DROPIN = """[Service]
TimeoutStopSec=5s
"""


def write(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace `path` (never through a symlink into the machine's own files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.is_file():
        path.unlink()
    path.write_text(text)
    path.chmod(mode)


def enabled_units(root: Path) -> set[str]:
    """Units enabled on the image: links in /etc/systemd/system/*.wants|*.requires."""
    units = set()
    base = root / "etc/systemd/system"
    for wants in list(base.glob("*.wants")) + list(base.glob("*.requires")):
        units.update(p.name for p in wants.iterdir())
    return units


def mask_services(root: Path) -> list[str]:
    """Mask what the host should not run; unlink DISABLE_ONLY units. Returns masked units."""
    base = root / "etc/systemd/system"
    masked = []
    for unit in sorted((enabled_units(root) | set(ALWAYS_MASK)) - KEEP_ENABLED - DISABLE_ONLY):
        link = base / unit
        if link.is_file() and not link.is_symlink():
            # a unit written into /etc by a deploy on this host (a restarted host keeps its
            # vLLM unit, as a real one does); the image's own units live in /lib
            continue
        if link.is_symlink() and os.readlink(link) == "/dev/null":
            masked.append(unit)
            continue
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to("/dev/null")
        masked.append(unit)
    for unit in DISABLE_ONLY:
        for wants in base.glob("*.wants"):
            if (wants / unit).is_symlink():
                (wants / unit).unlink()
    return masked


def host_keypair(host_dir: Path, name: str) -> str:
    """This host's own ed25519 host key (generated once per host); returns the public line."""
    key = host_dir / "ssh_host_ed25519_key"
    if not key.is_file():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}", "-f", str(key)])
    return key.with_suffix(".pub").read_text().strip()


def install_ssh(root: Path, host_dir: Path, name: str, lab_key: Path, known_hosts: str) -> None:
    """Host key, sshd drop-in, root's authorized_keys, the lab key and known_hosts."""
    ssh = root / "etc/ssh"
    for old in ssh.glob("ssh_host_*"):
        old.unlink()  # the machine's host keys: must not be shared by every host
    shutil.copyfile(host_dir / "ssh_host_ed25519_key", ssh / "ssh_host_ed25519_key")
    (ssh / "ssh_host_ed25519_key").chmod(0o600)
    shutil.copyfile(host_dir / "ssh_host_ed25519_key.pub", ssh / "ssh_host_ed25519_key.pub")
    write(ssh / "sshd_config.d/00-vfleet-lab.conf", SSHD_DROPIN)
    dot = root / "root/.ssh"
    if dot.is_symlink() or (dot.exists() and not dot.is_dir()):
        dot.unlink()
    if dot.is_dir():
        shutil.rmtree(dot)  # hide the machine's own keys/config from the host
    dot.mkdir(mode=0o700, parents=True)
    pub = Path(str(lab_key) + ".pub").read_text()
    write(dot / "authorized_keys", pub, 0o600)
    write(dot / "id_ed25519", lab_key.read_text(), 0o600)
    write(dot / "id_ed25519.pub", pub, 0o644)
    write(dot / "known_hosts", known_hosts, 0o644)


def hosts_file(entries: list[tuple[str, str]]) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", ""]
    lines += [f"{ip}\t{name}" for name, ip in entries]
    return "\n".join(lines) + "\n"


def prepare(
    root: Path, host_dir: Path, name: str, machine_id: str, lab_key: Path, known_hosts: str, hosts: str
) -> list[str]:
    """Everything a host needs in its overlay before boot; returns the masked units."""
    write(root / "etc/hostname", name + "\n")
    write(root / "etc/machine-id", machine_id + "\n", 0o444)
    write(root / "etc/hosts", hosts)
    install_ssh(root, host_dir, name, lab_key, known_hosts)
    write(root / "etc/systemd/system/user@.service.d/vfleet-lab.conf", USER_UNIT_DROPIN)
    return mask_services(root)


def refresh_names(root: Path, known_hosts: str, hosts: str) -> None:
    """Update /etc/hosts and known_hosts of a running host when the lab grows."""
    write(root / "etc/hosts", hosts)
    write(root / "root/.ssh/known_hosts", known_hosts, 0o644)
