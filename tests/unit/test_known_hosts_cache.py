"""Host keys come from a known_hosts file parsed once per process: a connection gets exactly the
entries for its own address (plain, hashed, [host]:port), and an edited file is read again."""

from __future__ import annotations

from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from vfleet.engine import connection


def _pub() -> str:
    key = Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def _keys(files: list[Path], address: str, port: int = 22) -> paramiko.HostKeys:
    target = paramiko.HostKeys()
    connection._add_known_keys(target, files, address, port)
    return target


def test_only_this_hosts_entries_plain_hashed_and_port(tmp_path: Path) -> None:
    a, b, c = _pub(), _pub(), _pub()
    kh = tmp_path / "known_hosts"
    kh.write_text(f"lab1,10.0.0.11 {a}\n{paramiko.HostKeys.hash_host('10.0.0.12')} {b}\n[10.0.0.13]:2222 {c}\n")
    one = _keys([kh], "10.0.0.11")
    assert list(one.keys()) == ["10.0.0.11"]
    assert one.lookup("10.0.0.11")["ssh-ed25519"].get_base64() == a.split()[1]
    assert _keys([kh], "10.0.0.12").lookup("10.0.0.12")["ssh-ed25519"].get_base64() == b.split()[1]
    assert _keys([kh], "10.0.0.13", 2222).lookup("[10.0.0.13]:2222")["ssh-ed25519"].get_base64() == c.split()[1]
    assert _keys([kh], "10.0.0.13").lookup("10.0.0.13") is None  # port 22 is another entry
    assert _keys([kh], "10.0.0.99").lookup("10.0.0.99") is None


def test_later_file_wins_and_missing_file_is_skipped(tmp_path: Path) -> None:
    first, second = tmp_path / "inventory_known", tmp_path / "user_known"
    a, b = _pub(), _pub()
    first.write_text(f"10.0.0.11 {a}\n")
    second.write_text(f"10.0.0.11 {b}\n")
    got = _keys([first, tmp_path / "absent", second], "10.0.0.11")
    assert got.lookup("10.0.0.11")["ssh-ed25519"].get_base64() == b.split()[1]


def test_parsed_once_and_again_after_an_edit(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(f"10.0.0.11 {_pub()}\n")
    assert connection._parsed_known_hosts(kh) is connection._parsed_known_hosts(kh)
    new = _pub()
    kh.write_text(f"10.0.0.11 {new}\n10.0.0.12 {_pub()}\n")  # other size: a new parse
    assert _keys([kh], "10.0.0.11").lookup("10.0.0.11")["ssh-ed25519"].get_base64() == new.split()[1]
