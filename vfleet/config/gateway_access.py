"""Who may use a gateway and how it is reached: its tenants (client keys with their limits) and
its TLS files, read from the controller once per run.

Why here and not in the inventory loader: the engine knows no variable, and these values need
more than a schema row can say (exactly one of key_file/key_env, unique names and keys, a
certificate with its key). The schema (vfleet/config/variables.py) has already checked each
field's type, pattern and range; this module reads what the fields point at and checks the
rules across them. Each problem is one line naming where the list was written, the key
(vars.gateway_tenants[2].key_file) and the fix, and never a key: every key read is given to the
run's redactor at once, like the inventory's other secrets (vfleet/engine/inventory/secrets.py,
whose safe file reader this uses).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vfleet.engine.errors import InventoryError
from vfleet.engine.inventory import Host
from vfleet.engine.inventory.secrets import SecretRead, read_secret_file
from vfleet.engine.redact import current

__all__ = ["Tenant", "GatewayTls", "GatewayAccessReader", "MIN_KEY_LENGTH", "MAX_KEY_LENGTH"]

MIN_KEY_LENGTH = 16  # a key shorter than this can be guessed
MAX_KEY_LENGTH = 4096  # one Authorization header line, well under nginx's 8k header buffer
# What a client can send after "Bearer " (RFC 6750's b64token and every printable ASCII but
# the space): a key outside it could never match, and a newline would split a header.
_KEY_CHARS = re.compile(r"[!-~]+", re.ASCII)
_CERT = "-----BEGIN CERTIFICATE-----"
_PRIVATE_KEY = re.compile(r"-----BEGIN (?:RSA |EC |)PRIVATE KEY-----")
_ENCRYPTED = ("ENCRYPTED PRIVATE KEY", "Proc-Type: 4,ENCRYPTED")


@dataclass(frozen=True)
class Tenant:
    """One team or application of a gateway: its key and its limits."""

    name: str
    key: str = field(repr=False)  # the secret; given to the run's redactor when read
    rate: str  # nginx limit_req rate, "10r/s"
    burst: int = 0
    models: tuple[str, ...] | None = None  # None: every model of the gateway
    max_concurrent: int | None = None
    max_tokens: int | None = None

    @property
    def key_sha256(self) -> str:
        """What the gateway compares a client's key with: the key itself never leaves the
        controller."""
        return hashlib.sha256(self.key.encode()).hexdigest()


def _read_pem(path: str, var: str) -> SecretRead:
    """A TLS file (the variable says which): a regular PEM file of at most 64 KiB. Only the
    key's mode matters (a certificate is public); the key is given to the redactor."""
    read = read_secret_file(Path(path), one_line=False)
    if read.secret is None:
        return read
    if var != "gateway_tls_key_file":
        return read if _CERT in read.secret else SecretRead(None, f"not a PEM certificate (no '{_CERT}' line)")
    current().add(read.secret)
    if any(mark in read.secret for mark in _ENCRYPTED):
        return SecretRead(
            None,
            "the key is encrypted and nginx would ask for its passphrase at start; "
            "decrypt it (openssl pkey -in KEY -out KEY.plain)",
        )
    if not _PRIVATE_KEY.search(read.secret):
        return SecretRead(None, "not a PEM private key (no '-----BEGIN PRIVATE KEY-----' line)")
    return read


@dataclass(frozen=True)
class GatewayTls:
    """The gateway's certificate and key (controller paths, ~ expanded) and the CA vfleet's own
    clients trust for it (None: the system's CAs)."""

    cert_file: str
    key_file: str
    ca_file: str | None = None

    def read(self) -> tuple[str, str]:
        """(certificate PEM, key PEM), read again when the gateway's files are written (the
        key is added to the redactor); InventoryError, one line naming the file, when one
        cannot be used."""
        texts = []
        for var, path in (("gateway_tls_cert_file", self.cert_file), ("gateway_tls_key_file", self.key_file)):
            read = _read_pem(path, var)
            if read.secret is None:
                raise InventoryError([f"vars.{var}: cannot use '{path}': {read.why}"])
            texts.append(read.secret)
        return texts[0], texts[1]


def _expanded(path: str) -> str | None:
    """The controller path with ~ expanded; None for a relative one (relative to what? the
    current directory of whoever runs vfleet, a different file for each of them)."""
    full = os.path.expanduser(path)
    return full if os.path.isabs(full) else None


@dataclass
class GatewayAccessReader:
    """Reads the tenants and TLS files of one run's gateways. Each file is read once however
    many gateways name it (cached by path, as SecretReader does); problems and warnings are
    collected for the fleet model to report with its other checks."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    _keys: dict[str, SecretRead] = field(default_factory=dict)
    _pems: dict[tuple[str, str], SecretRead] = field(default_factory=dict)

    # -- tenants ----------------------------------------------------------------------------
    def tenants(self, host: Host) -> tuple[Tenant, ...]:
        """The host's gateway_tenants as typed values; () when any of them is wrong."""
        rows = host.vars.get("gateway_tenants") or []
        where = host.sources.get("gateway_tenants", f"host '{host.name}'")
        out: list[Tenant] = []
        first: dict[str, int] = {}
        owner_of_key: dict[str, tuple[int, str]] = {}
        wrong = False
        for i, row in enumerate(rows):
            place = f"{where}: vars.gateway_tenants[{i}]"
            name = row["name"]
            if name in first:
                self._error(
                    f"{place}.name: tenant '{name}' is declared twice (also "
                    f"gateway_tenants[{first[name]}]); give each tenant its own name"
                )
                wrong = True
                continue
            first[name] = i
            found = self._key(place, row)
            if found is None:
                wrong = True
                continue
            source, key = found
            if key in owner_of_key:
                j, other = owner_of_key[key]
                self._error(
                    f"{place}.{source}: tenants '{other}' (gateway_tenants[{j}]) and "
                    f"'{name}' have the same key; give each tenant its own key"
                )
                wrong = True
                continue
            owner_of_key[key] = (i, name)
            if host.vars.get("api_key") and key == host.vars["api_key"]:
                self._error(
                    f"{place}.{source}: tenant '{name}' has the same key as the api_key "
                    f"of host '{host.name}' (the reserved tenant vfleet); give the "
                    "tenant a key of its own"
                )
                wrong = True
                continue
            out.append(
                Tenant(
                    name=name,
                    key=key,
                    rate=row["rate"],
                    burst=int(row.get("burst", 0)),
                    models=tuple(row["models"]) if "models" in row else None,
                    max_concurrent=row.get("max_concurrent"),
                    max_tokens=row.get("max_tokens"),
                )
            )
        return () if wrong else tuple(out)

    def _key(self, place: str, row: dict[str, Any]) -> tuple[str, str] | None:
        """(the field it came from, the key) of one tenant, or None with the problem recorded."""
        given = [k for k in ("key_file", "key_env") if row.get(k)]
        if len(given) != 1:
            self._error(
                f"{place}: tenant '{row['name']}' sets "
                f"{'both key_file and key_env' if given else 'neither key_file nor key_env'}"
                "; set exactly one (a file on the controller or an environment variable)"
            )
            return None
        source = given[0]
        key = (
            self._key_from_file(place, row[source]) if source == "key_file" else self._key_from_env(place, row[source])
        )
        if key is None:
            return None
        why = None
        if not MIN_KEY_LENGTH <= len(key) <= MAX_KEY_LENGTH:
            why = f"is {len(key)} characters long; a key is {MIN_KEY_LENGTH} to {MAX_KEY_LENGTH}"
        elif not _KEY_CHARS.fullmatch(key):
            why = "holds a space or a character that is not printable ASCII, which no client can send after 'Bearer '"
        if why:
            self._error(
                f"{place}.{source}: the key of tenant '{row['name']}' {why}; make a new "
                "one, e.g. `openssl rand -hex 32`"
            )
            return None
        return source, key

    def _key_from_file(self, place: str, path: str) -> str | None:
        full = _expanded(path)
        if full is None:
            self._error(
                f"{place}.key_file: '{path}' is a relative path; write it absolute "
                "(/etc/vfleet/keys/NAME.key) or from your home (~/keys/NAME.key)"
            )
            return None
        if full not in self._keys:
            self._keys[full] = read = read_secret_file(Path(full))
            current().add(read.secret)
            if read.warning:
                self.warnings.append(f"{place}.key_file: key file '{full}' is {read.warning}")
        read = self._keys[full]
        if read.secret is None:
            self._error(f"{place}.key_file: cannot read key file '{full}': {read.why}")
        return read.secret

    def _key_from_env(self, place: str, name: str) -> str | None:
        key = os.environ.get(name, "").strip()
        current().add(key)
        if not key:
            self._error(
                f"{place}.key_env: environment variable '{name}' is not set or empty; "
                "export it before running vfleet, or use key_file"
            )
            return None
        if "\n" in key or "\r" in key:
            self._error(f"{place}.key_env: environment variable '{name}' holds more than one line; a key is one line")
            return None
        return key

    # -- TLS --------------------------------------------------------------------------------
    def tls(self, host: Host) -> GatewayTls | None:
        """The host's TLS files, each checked (read, PEM-looking); None without TLS or when
        they are wrong (the problem recorded)."""
        v = host.vars
        cert, key, ca = (v.get(f"gateway_tls_{k}_file") for k in ("cert", "key", "ca"))
        if not (cert or key):
            if ca:
                self._error(
                    f"{self._where(host, 'gateway_tls_ca_file')}: vars.gateway_tls_ca_file "
                    "is set but the gateway has no TLS; set gateway_tls_cert_file and "
                    "gateway_tls_key_file too, or remove it"
                )
            return None
        if not (cert and key):
            have, lack = (
                ("gateway_tls_cert_file", "gateway_tls_key_file")
                if cert
                else ("gateway_tls_key_file", "gateway_tls_cert_file")
            )
            self._error(
                f"{self._where(host, have)}: vars.{have} is set but {lack} is not; "
                "set both (HTTPS) or neither (plain HTTP)"
            )
            return None
        given = {
            var: path
            for var, path in (
                ("gateway_tls_cert_file", cert),
                ("gateway_tls_key_file", key),
                ("gateway_tls_ca_file", ca),
            )
            if path
        }
        full = {var: self._pem_path(host, var, path) for var, path in given.items()}
        if None in full.values():
            return None
        return GatewayTls(
            str(full["gateway_tls_cert_file"]), str(full["gateway_tls_key_file"]), full.get("gateway_tls_ca_file")
        )

    def _pem_path(self, host: Host, var: str, path: str) -> str | None:
        """The file's full path once read and found usable; None with the problem recorded."""
        place = f"{self._where(host, var)}: vars.{var}"
        full = _expanded(path)
        if full is None:
            self._error(f"{place}: '{path}' is a relative path; write it absolute or from your home (~/...)")
            return None
        if (var, full) not in self._pems:
            self._pems[(var, full)] = read = _read_pem(full, var)
            if read.warning and var == "gateway_tls_key_file":
                self.warnings.append(f"{place}: TLS key file '{full}' is {read.warning}")
        read = self._pems[(var, full)]
        if read.secret is None:
            self._error(f"{place}: cannot use '{full}': {read.why}")
            return None
        return full

    # -- fallback ---------------------------------------------------------------------------
    def fallback_model(self, host: Host, served: str | None) -> str | None:
        """The host's gateway_fallback_model; never the model itself."""
        fallback = host.vars.get("gateway_fallback_model")
        if fallback is not None and fallback == served:
            self._error(
                f"{self._where(host, 'gateway_fallback_model')}: vars.gateway_fallback_model "
                f"is '{fallback}', the model itself; name another "
                "model, or remove it"
            )
            return None
        return fallback

    # -- reporting --------------------------------------------------------------------------
    @staticmethod
    def _where(host: Host, var: str) -> str:
        return host.sources.get(var, f"host '{host.name}'")

    def _error(self, message: str) -> None:
        """One line per problem, once however many gateways share the group's value."""
        if message not in self.errors:
            self.errors.append(message)

    def raise_errors(self) -> None:
        if self.errors:
            raise InventoryError(self.errors)
