"""Where the lab keeps what it made, so `down` can undo it even after a crash.

Layout of the state dir (default /var/lib/vfleet-lab, env VFLEET_LAB_DIR):
    id_ed25519, id_ed25519.pub   the lab's SSH key (generated once, kept by `down`)
    known_hosts                  host keys of the lab hosts (host key checking stays on)
    inventory.yaml               the Ansible inventory `up` wrote
    lab.json                     lab-wide facts (prefix, what `up` mounted/created)
    hosts/<name>/host.json       one record per host (ip, uuid, pid, profile)
    hosts/<name>/disk/           tmpfs: overlay upper+work dirs
    hosts/<name>/root/           the overlay (lowerdir=/) the host boots from
    hosts/<name>/console.log     systemd-nspawn's output
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_STATE_DIR = "/var/lib/vfleet-lab"
# Names on the machine: every one starts with a lab-only prefix so discovery after a crash
# can find them without the state dir.
NETNS_PREFIX = "vfl-"  # network namespace per host: vfl-<host>
VETH_PREFIX = "vfv-"  # root-side veth end per host: vfv-<host> (15-char IFNAMSIZ)
BRIDGE = "vfl-br0"
SUBNET_PREFIX = "10.213.0"  # /24 used by the lab only
BRIDGE_IP = f"{SUBNET_PREFIX}.1"
FIRST_HOST_OCTET = 10  # host i (1-based) gets .10+i
MAX_HOSTS = 240
MAX_NAME = 15 - len(VETH_PREFIX)


def host_ip(index: int) -> str:
    return f"{SUBNET_PREFIX}.{FIRST_HOST_OCTET + index}"


@dataclass
class HostRecord:
    """What `up` knows about one host; persisted so `status`/`down` work from a new process."""

    name: str
    index: int
    ip: str
    uuid: str
    profile: str = ""
    profile_dir: str = ""
    pid: int = 0
    extra: dict = field(default_factory=dict)


class LabState:
    """Paths and records under the state dir."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root or os.environ.get("VFLEET_LAB_DIR") or DEFAULT_STATE_DIR)

    key = property(lambda self: self.root / "id_ed25519")
    pubkey = property(lambda self: self.root / "id_ed25519.pub")
    known_hosts = property(lambda self: self.root / "known_hosts")
    inventory = property(lambda self: self.root / "inventory.yaml")
    lab_file = property(lambda self: self.root / "lab.json")
    hosts_dir = property(lambda self: self.root / "hosts")

    def host_dir(self, name: str) -> Path:
        return self.hosts_dir / name

    def load_host(self, name: str) -> HostRecord | None:
        path = self.host_dir(name) / "host.json"
        if not path.is_file():
            return None
        try:
            return HostRecord(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            return None  # torn write after a crash: treat as unknown, `down` still cleans

    def save_host(self, rec: HostRecord) -> None:
        path = self.host_dir(rec.name) / "host.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(rec), indent=2) + "\n")
        tmp.replace(path)

    def hosts(self) -> list[HostRecord]:
        """Every host record, ordered by index."""
        if not self.hosts_dir.is_dir():
            return []
        recs = [self.load_host(p.name) for p in self.hosts_dir.iterdir() if p.is_dir()]
        return sorted((r for r in recs if r), key=lambda r: r.index)

    def lab(self) -> dict:
        try:
            return json.loads(self.lab_file.read_text())
        except (OSError, ValueError):
            return {}

    def save_lab(self, data: dict) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.lab_file.write_text(json.dumps(data, indent=2) + "\n")
