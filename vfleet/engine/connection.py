"""Connections to hosts: Fabric's Connection for SSH, a subprocess for `localhost`.

Both expose the same two calls (run, close) so operations never care which one
they talk to. Fabric's defaults are changed where a fleet tool needs stricter ones: host keys
are checked against known_hosts unless the inventory explicitly opts out, every command has a
timeout, and failures become UnreachableError/CommandError with a one-line operator message."""

from __future__ import annotations

import os
import select
import shlex
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import paramiko
from fabric import Config, Connection

from vfleet.engine.errors import VfleetError

# A host that vanishes (powered off, container stopped, cable pulled) sends no RST: without
# these a command on it waits out its whole timeout (24 h for a weight copy). Keepalives keep
# bytes in flight; TCP_USER_TIMEOUT drops the connection when they stay unacknowledged.
KEEPALIVE_S = 5


def dead_after_s(connect_timeout: float) -> float:
    """How long a silent peer may leave our keepalives unacknowledged before it counts as gone."""
    return max(15.0, 3 * connect_timeout)


# What paramiko says when the TCP connection opened but SSH never started (the transport
# gave up after banner_timeout / the connect timeout): a timeout, not an SSH error.
NO_HANDSHAKE = ("protocol banner", "No existing session", "Negotiation timed out")


class UnreachableError(VfleetError):
    """The host could not be connected to (refused, timed out, unknown host key, bad auth)."""


class CommandError(VfleetError):
    """A command the operation depends on failed; carries its output for the report."""

    def __init__(self, message: str, result: "CommandResult | None" = None):
        super().__init__(message)
        self.result = result


@dataclass
class CommandResult:
    command: str
    exited: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exited == 0 and not self.timed_out

    def tail(self, lines: int = 5) -> str:
        """The last lines of stderr (or stdout), for one-line failure messages."""
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return " | ".join(text[-lines:])


@dataclass
class ConnectionSettings:
    address: str
    user: str | None = None
    port: int = 22
    key_file: str | None = None
    connect_timeout: float = 10.0
    command_timeout: float = 600.0
    host_key_checking: bool = True
    known_hosts_file: str | None = None
    become: bool = False


class HostConnection(Protocol):
    def run(self, command: str, *, timeout: float | None = None, stdin: str | None = None) -> CommandResult: ...
    def close(self) -> None: ...


_KNOWN: dict[tuple[str, int, int], paramiko.HostKeys] = {}
_KNOWN_LOCK = threading.Lock()


def _parsed_known_hosts(path: Path) -> paramiko.HostKeys | None:
    """A known_hosts file parsed once per process (and again only when it changes). Why: every
    connection parsing the whole file made host key loading quadratic in fleet size (100 hosts
    each reading a 100-line file: 0.4 s of CPU before any packet was sent)."""
    try:
        st = path.stat()
    except OSError:
        return None
    key = (str(path), st.st_mtime_ns, st.st_size)
    with _KNOWN_LOCK:
        if key not in _KNOWN:
            _KNOWN[key] = paramiko.HostKeys(str(path))
        return _KNOWN[key]


def _add_known_keys(target: paramiko.HostKeys, files: list[Path], address: str, port: int) -> None:
    """Copy into a client's host keys only the entries for this address (paramiko's own lookup:
    plain, hashed and `[host]:port` entries), from each file in order."""
    name = address if port == 22 else f"[{address}]:{port}"
    for path in files:
        parsed = _parsed_known_hosts(path)
        for keytype, pkey in (parsed.lookup(name) or {}).items() if parsed else ():
            target.add(name, keytype, pkey)


def _wrap_become(command: str, become: bool) -> str:
    return f"sudo -n -- sh -c {shlex.quote(command)}" if become else command


class SSHConnection:
    """A Fabric Connection with host key checking on and timeouts everywhere."""

    def __init__(self, name: str, settings: ConnectionSettings):
        self.name = name
        self.settings = settings
        connect_kwargs: dict = {"banner_timeout": settings.connect_timeout, "auth_timeout": settings.connect_timeout}
        if settings.key_file:
            connect_kwargs["key_filename"] = os.path.expanduser(settings.key_file)
            connect_kwargs["look_for_keys"] = False
        self.conn = Connection(
            host=settings.address,
            user=settings.user,
            port=settings.port,
            connect_timeout=settings.connect_timeout,
            connect_kwargs=connect_kwargs,
            config=Config(
                overrides={
                    "run": {"hide": True, "warn": True, "in_stream": False},
                    "timeouts": {"connect": settings.connect_timeout},
                }
            ),
        )
        client: paramiko.SSHClient = self.conn.client
        if settings.host_key_checking:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
            known = settings.known_hosts_file
            files = []
            if known:
                path = Path(os.path.expanduser(known))
                if not path.is_file():
                    raise UnreachableError(
                        f"{name}: known_hosts_file {path} does not exist; create it "
                        f"(ssh-keyscan after verifying the keys) or fix the inventory"
                    )
                files.append(path)
            # the user's own file last: its entries win, as with paramiko's system host keys
            files.append(Path(os.path.expanduser("~/.ssh/known_hosts")))
            _add_known_keys(client.get_host_keys(), files, settings.address, settings.port)
        else:
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        self._open()

    def _open(self) -> None:
        s = self.settings
        where = f"{self.name} ({s.user + '@' if s.user else ''}{s.address}:{s.port})"
        try:
            self.conn.open()
            self._detect_dead_peer()
        except paramiko.BadHostKeyException:
            raise UnreachableError(
                f"{where}: host key does NOT match known_hosts (host reinstalled, or someone in "
                f"between); verify it, then remove the old line with `ssh-keygen -R {s.address}`"
            ) from None
        except paramiko.SSHException as exc:
            text = str(exc)
            if "not found in known_hosts" in text:
                known = s.known_hosts_file or "~/.ssh/known_hosts"
                raise UnreachableError(
                    f"{where}: unknown host key (not in {known}); verify and add it with "
                    f"`ssh-keyscan -p {s.port} {s.address} >> {known}`, or set host_key_checking: false"
                ) from None
            if any(m in text for m in NO_HANDSHAKE):  # TCP accepted, then silence: a wedged sshd, or not sshd
                raise UnreachableError(
                    f"{where}: connection timed out: TCP connected but no SSH handshake "
                    f"within {s.connect_timeout:g}s (sshd hung, or not an sshd)"
                ) from None
            if isinstance(exc, paramiko.AuthenticationException):
                raise UnreachableError(
                    f"{where}: authentication failed ({text}); check ssh_user/ssh_key_file"
                ) from None
            raise UnreachableError(f"{where}: SSH error: {text}") from None
        except (socket.timeout, TimeoutError):
            raise UnreachableError(f"{where}: connection timed out after {s.connect_timeout:g}s") from None
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise UnreachableError(f"{where}: cannot connect: {reason}") from None

    def _detect_dead_peer(self) -> None:
        transport = self.conn.transport
        if transport is None:
            return
        transport.set_keepalive(KEEPALIVE_S)
        sock = transport.sock
        if hasattr(socket, "TCP_USER_TIMEOUT") and isinstance(sock, socket.socket):
            sock.setsockopt(
                socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(dead_after_s(self.settings.connect_timeout) * 1000)
            )

    def run(self, command: str, *, timeout: float | None = None, stdin: str | None = None) -> CommandResult:
        """Run on a new channel of the Connection's transport. Not Fabric's Connection.run:
        its stdin pump reads one byte per 10 ms (a 2 KB unit file took 21 s) and its I/O
        threads add ~0.2 s to every command; a bare exec channel does neither."""
        timeout = self.settings.command_timeout if timeout is None else timeout
        full = _wrap_become(command, self.settings.become)
        transport = self.conn.transport
        if transport is None or not transport.is_active():
            raise UnreachableError(f"{self.name}: connection lost")
        deadline = time.monotonic() + timeout
        try:
            # The channel open counts against the command's time, not the connect timeout: the
            # host has answered already, and a loaded one (100 hosts' facts at once on 2 cores)
            # can take longer than connect_timeout to start a session without being unreachable.
            try:
                chan = transport.open_session(timeout=timeout)
            except paramiko.SSHException as exc:
                if "Timeout opening channel" not in str(exc):
                    raise
                return CommandResult(command, -1, "", f"no session channel within {timeout:g}s", timed_out=True)
            chan.exec_command(full)
            if stdin is not None:
                chan.sendall(stdin.encode())
            chan.shutdown_write()
            out, err = bytearray(), bytearray()
            timed_out = False
            while True:
                got = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    got = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    got = True
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                if not got:
                    _wait(chan, deadline)
            code = -1 if timed_out else chan.recv_exit_status()
            chan.close()
            if not timed_out and code == -1 and not transport.is_active():  # closed by the dead-peer timeout
                raise UnreachableError(
                    f"{self.name}: connection lost while running a command (no answer for "
                    f"{dead_after_s(self.settings.connect_timeout):g}s: the host went away)"
                )
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise UnreachableError(f"{self.name}: connection lost: {exc or type(exc).__name__}") from None
        return CommandResult(
            command, code, out.decode(errors="replace"), err.decode(errors="replace"), timed_out=timed_out
        )

    def close(self) -> None:
        self.conn.close()


def _wait(chan: paramiko.Channel, deadline: float) -> None:
    """Sleep until the channel has something for us, without polling. Until stdout's EOF the
    channel's pipe wakes us on stdout data and on EOF (stderr alone is drained every 0.2 s);
    after it, the pipe stays readable, so the exit status event is what to wait on. Why: the
    old 20 ms poll woke each of 100 host threads 50 times a second, CPU the hosts' own
    commands needed when controller and fleet share cores (benchmarks/peer_race.py)."""
    left = max(0.0, deadline - time.monotonic())
    if chan.eof_received:
        chan.status_event.wait(min(left, 0.2))
    else:
        select.select([chan], [], [], min(left, 0.2))


class LocalConnection:
    """The controller itself (`localhost` or `ansible_connection: local`): same calls, no SSH."""

    def __init__(self, name: str, settings: ConnectionSettings):
        self.name = name
        self.settings = settings

    def run(self, command: str, *, timeout: float | None = None, stdin: str | None = None) -> CommandResult:
        timeout = self.settings.command_timeout if timeout is None else timeout
        full = _wrap_become(command, self.settings.become)
        try:
            p = subprocess.run(
                ["/bin/sh", "-c", full],
                input=stdin if stdin is not None else "",
                capture_output=True,
                text=True,
                timeout=timeout,
                errors="replace",
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return CommandResult(command, -1, out, err, timed_out=True)
        return CommandResult(command, p.returncode, p.stdout, p.stderr)

    def close(self) -> None:
        pass


def open_connection(name: str, connection_type: str, settings: ConnectionSettings) -> HostConnection:
    """Connect now (not lazily) so an unreachable host is found before any change is made."""
    if connection_type == "local":
        return LocalConnection(name, settings)
    return SSHConnection(name, settings)
