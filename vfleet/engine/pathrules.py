"""Path rules for variables that name a file or folder: the named kinds a schema can ask for.

Why here, and why kinds: a path in an inventory ends up in `rm -rf`, `mv`, `chown -R`, `mkdir -p`,
systemd's EnvironmentFile= and rsync's destination, so every path variable must pass the same
few rules, and a new path variable must get them by naming its kind in its schema
(`{"type": "string", "path": "host_dir"}`), not by copying a regular expression.

- `host_dir`: a folder (or file) on the host that vfleet creates, replaces or removes things
  in: absolute, normalized, printable ASCII, and never a system folder (SYSTEM_DIRS).
- `host_file`: a file on the host that vfleet or vLLM only reads (an interpreter, a key):
  absolute, normalized, printable ASCII.
- `relative`: a path inside a root vfleet owns (model_name under model_dir): relative,
  normalized, no `..`, no part starting with '.' (vfleet keeps .versions and .staging there).
- `name`: a single plain folder name (vllm_venv_name under vllm_root).
- `controller`: a path on the controller (key files, known_hosts, a wheelhouse): may be
  relative or start with '~', but normalized, and never starting with '-' (it would read as
  an option on ssh's or rsync's command line).
- `source`: a controller path, HOST:/path of weights already on a host, or
  hf://ORG/NAME[@REVISION], a model repository on the Hugging Face hub (its shape checked by
  huggingface_hub's own URI parser; the revision by REVISION below).

"Normalized" is posixpath.normpath(p) == p: no `.` or `..` parts, no `//`, no trailing '/'.
systemd refuses an EnvironmentFile= path that is not normalized ("Path ... is not
normalized") and starts the service WITHOUT it, so vLLM would come up without its API key
(systemd.exec(5): EnvironmentFile= takes an absolute, normalized file name).
"""

from __future__ import annotations

import posixpath
import re

__all__ = [
    "PATH_KINDS",
    "SYSTEM_DIRS",
    "REVISION",
    "HUB_SCHEME",
    "path_problem",
    "hub_problem",
    "is_host_source",
    "revision_problem",
    "is_system_dir",
    "kind_words",
]

# Folders a distribution owns, where vfleet must never create, replace or remove anything: the
# folder itself is refused, a folder below it (/srv/models, /opt/vllm, /var/lib/vllm) is fine.
# /usr/<anything> at depth 2 (/usr/lib, /usr/local, /usr/share) is refused too.
SYSTEM_DIRS = frozenset(
    (
        "/",
        "/bin",
        "/sbin",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/usr",
        "/etc",
        "/boot",
        "/dev",
        "/proc",
        "/sys",
        "/run",
        "/var",
        "/var/lib",
        "/var/log",
        "/var/cache",
        "/var/tmp",
        "/var/spool",
        "/var/mail",
        "/var/opt",
        "/var/backups",
        "/var/local",
        "/home",
        "/root",
        "/tmp",
        "/srv",
        "/opt",
        "/mnt",
        "/media",
        "/snap",
        "/lost+found",
        "/etc/systemd",
        "/etc/systemd/system",
        "/lib/systemd",
        "/lib/systemd/system",
        "/usr/lib/systemd",
        "/usr/lib/systemd/system",
    )
)
PATH_KINDS = ("host_dir", "host_file", "relative", "name", "controller", "source")
_PRINTABLE = re.compile(r"[\x20-\x7e]+")
# A hub revision: a branch, tag, commit or refs/pr/N. git's ref rules (git-check-ref-format(1))
# narrowed to what hub repos use, so a revision is also safe in a printed command and a report.
REVISION = re.compile(r"^(?!.*\.\.)(?!.*/$)[A-Za-z0-9_][A-Za-z0-9._/+-]{0,254}$")
HUB_SCHEME = "hf://"
_NAME = re.compile(r"[A-Za-z0-9_@+][A-Za-z0-9._@+-]*")
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_MAX_PART = 255  # NAME_MAX of Linux file systems


def is_system_dir(path: str) -> bool:
    """True for a folder in SYSTEM_DIRS or /usr/<one part>."""
    return path in SYSTEM_DIRS or (path.startswith("/usr/") and path.count("/") == 2)


def _not_normalized(path: str) -> str | None:
    """Why a path is not normalized, in the words an operator can act on."""
    parts = path.split("/")
    if ".." in parts:
        return "has a '..' part; write the path without it"
    if "//" in path:
        return "has '//'; write one '/'"
    if len(path) > 1 and path.endswith("/"):
        return "ends with '/'; drop it"
    if "." in parts:
        return "has a '.' part; write the path without it"
    if posixpath.normpath(path) != path:
        return f"is not normalized; write {posixpath.normpath(path)!r}"
    return None


def _ascii_problem(path: str) -> str | None:
    if not _PRINTABLE.fullmatch(path):
        return "has a character that is not printable ASCII"
    if path != path.strip():
        return "starts or ends with a space"
    if any(len(part) > _MAX_PART for part in path.split("/")):
        return f"has a part longer than {_MAX_PART} characters"
    return None


def _host_path(path: str, system: bool) -> str | None:
    if not path.startswith("/"):
        return "is not absolute; give the full path from '/'"
    why = _ascii_problem(path) or _not_normalized(path)
    if why:
        return why
    if system and is_system_dir(path):
        return (
            "is a system folder (vfleet creates, replaces and removes files where it points); "
            "give a folder of its own below it, e.g. /srv/models or /opt/vllm"
        )
    return None


def _relative(path: str) -> str | None:
    if path.startswith("/"):
        return "is absolute; give a path relative to its folder"
    why = _ascii_problem(path) or _not_normalized(path)
    if why:
        return why
    for part in path.split("/"):
        if not _NAME.fullmatch(part):
            return (
                f"has the part {part!r}; each part starts with a letter, digit, '_', '@' "
                "or '+' (vfleet keeps its own .versions and .staging beside it)"
            )
    return None


def _controller(path: str) -> str | None:
    if path.startswith("-"):
        return "starts with '-' (it would read as a command-line option); write ./ in front"
    if path != path.strip():
        return "starts or ends with a space"
    # The operator's own disk: '~/', one './' and leading '../' (a key beside the repository)
    # are how such paths are written; the rest must be normalized.
    rest = path[2:] if path.startswith(("~/", "./")) else path
    while rest.startswith("../"):
        rest = rest[3:]
    return _not_normalized(rest) if rest not in ("", "~", "..") else None


def revision_problem(revision: str) -> str | None:
    if not REVISION.fullmatch(revision):
        return (
            f"has the revision {revision!r}; a branch, tag or commit is letters, digits and . _ / + -, "
            "not starting with '.', '/' or '-', without '..' or a final '/'"
        )
    return None


def hub_problem(uri: str) -> str | None:
    """Why `uri` is not hf://ORG/NAME[@REVISION] of a model repository, or None."""
    from huggingface_hub.errors import HfUriError
    from huggingface_hub.utils import parse_hf_uri

    try:
        parsed = parse_hf_uri(uri)
    except HfUriError as e:
        return f"{' '.join(e.msg.split())} Write hf://ORG/NAME@REVISION"
    if parsed.type != "model" or parsed.path_in_repo:
        what = f"a path inside a {parsed.type} repository" if parsed.path_in_repo else f"a {parsed.type} repository"
        return f"names {what}; write the model repository alone, hf://ORG/NAME@REVISION"
    return revision_problem(parsed.revision) if parsed.revision is not None else None


def is_host_source(spec: str | None) -> bool:
    """HOST:/path (weights already on a host): a ':' before any '/', in a spec that is not
    hf://. The one reading of a source's form, for the schema and the roles alike."""
    return (
        bool(spec)
        and not str(spec).startswith(HUB_SCHEME)
        and ":" in str(spec)
        and not str(spec).startswith(("/", "./", "../", "~"))
    )


def _source(path: str) -> str | None:
    if path.startswith(HUB_SCHEME):
        return hub_problem(path)
    if path.startswith("-"):
        return "starts with '-' (it would read as a command-line option)"
    if ".." in path.split("/"):
        return "has a '..' part; write the path without it"
    # The same split as the weights role: a ':' before any '/' names HOST:/path.
    if is_host_source(path):
        host, _, where = path.partition(":")
        if not _HOST.fullmatch(host):
            return f"names the host {host!r}, which is not a plain host name"
        why = _host_path(where, system=False)
        return f"(the path on {host}) {why}" if why else None
    return _controller(path)


def path_problem(path: str, kind: str) -> str | None:
    """Why `path` breaks the rules of `kind` (one of PATH_KINDS), or None when it is fine."""
    if kind == "host_dir":
        return _host_path(path, system=True)
    if kind == "host_file":
        return _host_path(path, system=False)
    if kind == "relative":
        return _relative(path)
    if kind == "name":
        if "/" in path:
            return "has a '/'; give one folder name"
        return (
            None
            if _NAME.fullmatch(path) and len(path) <= _MAX_PART
            else "is not a plain folder name (letters, digits and . _ @ + -, not starting with '.' or '-')"
        )
    if kind == "controller":
        return _controller(path)
    if kind == "source":
        return _source(path)
    raise ValueError(f"unknown path kind {kind!r}")


def kind_words(kind: str) -> str:
    """What a path kind accepts, for docs/variables.md and error messages."""
    return {
        "host_dir": "an absolute, normalized path, not a system folder",
        "host_file": "an absolute, normalized path",
        "relative": "a relative, normalized path without '..'",
        "name": "a single folder name",
        "controller": "a normalized path on the controller",
        "source": "a normalized controller path, HOST:/path or hf://ORG/NAME@REVISION",
    }[kind]
