"""Names service_name must not take: units and folders a distribution (or its packages) owns.

Why: service_name becomes /etc/systemd/system/<name>.service (a file there overrides the
distribution's unit of that name: `service_name: ssh` would replace sshd with vLLM), and the
unit's StateDirectory= and CacheDirectory= (/var/lib/<name>, /var/cache/<name>), which systemd
chowns recursively to the service user when the service starts (systemd commit "core: chown()
StateDirectory= and friends recursively when starting a service", 2017; systemd.exec(5)):
`service_name: apt` would hand /var/lib/apt to the vllm user. This is the static rule, by
name; whether a unit of that name already exists on a host is a host fact, checked there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RESERVED_SERVICE_NAMES", "RESERVED_SERVICE_PREFIXES", "RESERVED_RULE"]

RESERVED_SERVICE_NAMES = frozenset(
    (
        # remote access, logins and the bus
        "ssh",
        "sshd",
        "dbus",
        "dbus-broker",
        "getty",
        "serial-getty",
        "console-getty",
        "login",
        "polkit",
        "polkitd",
        "accounts-daemon",
        "user",
        "sudo",
        # time, logs, schedules
        "cron",
        "crond",
        "anacron",
        "atd",
        "rsyslog",
        "syslog",
        "chrony",
        "chronyd",
        "ntp",
        "ntpd",
        "ntpsec",
        "logrotate",
        # network
        "networking",
        "network",
        "NetworkManager",
        "wpa_supplicant",
        "ifup",
        "resolvconf",
        "avahi-daemon",
        "ufw",
        "firewalld",
        "nftables",
        "iptables",
        "netfilter-persistent",
        # packages, boot and storage (their /var/lib and /var/cache folders matter as much)
        "apt",
        "apt-daily",
        "apt-daily-upgrade",
        "dpkg",
        "unattended-upgrades",
        "snapd",
        "packagekit",
        "man-db",
        "debconf",
        "ucf",
        "pam",
        "private",
        "misc",
        "initramfs-tools",
        "udev",
        "lvm2",
        "multipathd",
        "mdadm",
        "smartd",
        "smartmontools",
        "udisks2",
        "irqbalance",
        "apparmor",
        "auditd",
        "cloud-init",
        "cloud-config",
        "cloud-final",
        "kmod",
        "rc-local",
        "emergency",
        "rescue",
        "nscd",
        "sssd",
        "fwupd",
        "thermald",
        "upower",
        "ModemManager",
        # what vfleet itself installs beside vLLM, and common neighbours on a GPU host
        "nginx",
        "prometheus",
        "prometheus-node-exporter",
        "prometheus-nginx-exporter",
        "ray",
        "docker",
        "containerd",
        "kubelet",
        "nvidia-persistenced",
        "nvidia-fabricmanager",
        "nvidia-dcgm",
        "dcgm",
        "nvidia-powerd",
        "apache2",
        "httpd",
        "haproxy",
        "postfix",
        "exim4",
        "mysql",
        "mariadb",
        "postgresql",
        "redis",
        "redis-server",
    )
)
# Unit families: systemd's own (systemd-journald, systemd-resolved...), templated getty
# instances, and anything named like a package's helper units.
RESERVED_SERVICE_PREFIXES = (
    "systemd-",
    "getty@",
    "serial-getty@",
    "user@",
    "user-runtime-dir@",
    "dbus-",
    "lvm2-",
    "cloud-init-",
)

# The schema's `reserved` keyword value (vfleet/engine/varschema.py).
RESERVED_RULE: dict[str, Any] = {
    "names": sorted(RESERVED_SERVICE_NAMES),
    "prefixes": list(RESERVED_SERVICE_PREFIXES),
    "why": "is the name of a unit or state folder the distribution owns (vfleet would replace "
    "its unit file and hand /var/lib/NAME to the service user)",
    "fix": "pick a name of your own, e.g. vllm-<model>",
}
