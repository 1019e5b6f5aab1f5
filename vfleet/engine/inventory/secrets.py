"""Secrets given as NAME_file or NAME_env, read at load time, never echoed.

A secret file is opened without blocking and read only if it is a regular file of at most
MAX_SECRET_BYTES: a FIFO or a device named by mistake (or malice) must not hang or flood
the loader. A secret is one line; a file with more is refused without quoting it (the
second line may be the secret). Files readable by group or others are a warning: the key
is only as secret as the file. No message here contains a secret value.

Every secret value seen here, inline or read, is given to the run's redactor
(vfleet.engine.redact) at once, so an error raised later in the same load (a wrong-typed
value echoed by a check) is printed with it hidden.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from vfleet.engine.inventory.common import Entry
from vfleet.engine.redact import current
from vfleet.engine.varschema import VarSchema

__all__ = ["SecretReader", "SecretRead", "read_secret_file", "MAX_SECRET_BYTES"]

MAX_SECRET_BYTES = 64 * 1024

# merged variables of one host: name -> (entry, precedence rank)
Merged = dict[str, tuple[Entry, int]]


@dataclass
class SecretRead:
    """A controller file read for a secret: its text, or why it cannot be used."""

    secret: str | None
    why: str | None = None  # why it cannot be used
    warning: str | None = None  # usable, but the operator should know


def read_secret_file(path: Path, *, one_line: bool = True) -> SecretRead:
    """The file's text (stripped), read without following a FIFO or a device and without
    reading more than MAX_SECRET_BYTES; `one_line=False` for a PEM file (a TLS key)."""
    too_large = f"larger than {MAX_SECRET_BYTES // 1024} KiB" + ("; a secret is one line" if one_line else "")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return SecretRead(None, "no such file")
    except OSError as exc:
        return SecretRead(None, exc.strerror or type(exc).__name__)
    except ValueError:
        return SecretRead(None, "the path holds a NUL character")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # before fdopen: it refuses a folder with an exception
        os.close(fd)
        return SecretRead(None, "not a regular file")
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > MAX_SECRET_BYTES:
            return SecretRead(None, too_large)
        data = fh.read(MAX_SECRET_BYTES + 1)
    if len(data) > MAX_SECRET_BYTES:
        return SecretRead(None, too_large)
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return SecretRead(None, "not UTF-8 text")
    if not text:
        return SecretRead(None, "the file is empty")
    if one_line and ("\n" in text or "\r" in text):
        return SecretRead(None, "it holds more than one line; a secret is one line")
    warning = None
    if st.st_mode & 0o077:
        warning = f"readable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); chmod 600 it"
    return SecretRead(text, warning=warning)


@dataclass
class SecretReader:
    """Resolves secrets for hosts; caches each file, so a group's key is read once."""

    schema: VarSchema
    base: Path
    errors: list[str]
    warnings: list[str]
    _files: dict[Path, SecretRead] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)

    def resolve(self, host: str, merged: Merged) -> None:
        """Replace NAME_file / NAME_env by the secret's value (as variable NAME)."""
        for name in self.schema.secret_names:
            if name in merged:
                current().add(merged[name][0].value)  # inline, whatever its type
            f_key, e_key = self.schema.secret_sources(name)
            given = [
                (merged[k][1], k)
                for k in (name, f_key, e_key)
                if k in merged and merged[k][0].value is not None and merged[k][0].source.scope != "default"
            ]
            if not given:
                continue
            top = max(r for r, _ in given)
            winners = [k for r, k in given if r == top]
            if len(winners) > 1:
                self._error(f"{merged[winners[0]][0].where}: set only one of {', '.join(winners)}")
                continue
            key = winners[0]
            entry, rank = merged[key]
            if key == name or not isinstance(entry.value, str) or not entry.value:
                continue  # inline, or a bad NAME_file/NAME_env the schema check reports
            secret = self._from_env(host, name, key, entry) if key == e_key else self._from_file(host, name, key, entry)
            if secret is not None:
                resolved = Entry(secret, entry.source)
                resolved.checked = False
                merged[name] = (resolved, rank)

    def _from_env(self, host: str, name: str, key: str, entry: Entry) -> str | None:
        secret = os.environ.get(entry.value)
        if not secret:
            self._error(
                f"{entry.where}: vars.{key}: environment variable '{entry.value}' is "
                f"not set or empty (needed for {name} of host '{host}')"
            )
            return None
        if "\n" in secret.strip() or "\r" in secret.strip():
            self._error(
                f"{entry.where}: vars.{key}: environment variable '{entry.value}' "
                f"holds more than one line (needed for {name} of host '{host}'); "
                "a secret is one line"
            )
            return None
        current().add(secret)
        return secret

    def _from_file(self, host: str, name: str, key: str, entry: Entry) -> str | None:
        path = Path(entry.value).expanduser()
        if not path.is_absolute():
            path = self.base / path
        if path not in self._files:
            self._files[path] = read = read_secret_file(path)
            if read.warning:
                self.warnings.append(f"{entry.where}: vars.{key}: secret file '{path}' is {read.warning}")
        read = self._files[path]
        current().add(read.secret)
        if read.secret is None:
            self._error(
                f"{entry.where}: vars.{key}: cannot read secret file '{path}' for {name} of host '{host}': {read.why}"
            )
        return read.secret

    def _error(self, message: str) -> None:
        if message not in self._seen:
            self._seen.add(message)
            self.errors.append(message)
