"""Where else NCCL variables reach the vLLM service from, besides vfleet's own environment file
and /etc/nccl.conf (both read by the `nccl_env_file` / `nccl_conf` facts): the service user's
~/.nccl.conf, the file NCCL_CONF_FILE names, and the systemd drop-ins of the vLLM unit with the
environment files they add. One probe prints each file it finds, bounded; this module builds
that probe and parses what it printed.

Why these files (NCCL reads its configuration files only for variables the process environment
does not set):
- ~/.nccl.conf, read only when NCCL_CONF_FILE is unset or empty (NVIDIA/nccl src/misc/param.cc
  initEnvFunc: `if (userFile && strlen(userFile) > 0) setEnvFile(userFile); else setEnvFile(
  "<home>/.nccl.conf")`, then /etc/nccl.conf always; https://github.com/NVIDIA/nccl/blob/master/
  src/misc/param.cc), is the passwd home of the user the process runs as (`getpwuid(getuid())->pw_dir`,
  NVIDIA/nccl src/misc/param.cc userHomeDir), not $HOME, which the vLLM unit sets to its state
  folder: so `getent passwd <vllm_user>` gives the folder.
- NCCL_CONF_FILE (NCCL >= 2.23) names the user file in its place
  (https://docs.nvidia.com/deeplearning/nccl/archives/nccl_2234/user-guide/docs/env.html; before
  2.23 the guide names ~/.nccl.conf: .../nccl_2134/user-guide/docs/env.html).
- A drop-in (/etc/systemd/system/<unit>.d/*.conf, /run/systemd/system/<unit>.d/*.conf) adds
  Environment= and EnvironmentFile= lines to the unit vfleet wrote (systemd.unit(5)); an
  environment file added there is read after vfleet's own, so its values win over vfleet's
  (systemd.exec(5), EnvironmentFile=: later files override earlier ones).

NCCL reads its files line by line, literally (param.cc setEnvFile): a line starting with '#' is
skipped, the rest is split at the first '=' with nothing stripped, so `export NCCL_X=1` sets a
variable named "export NCCL_X" and quotes stay in the value. Those files are parsed by that
rule (`nccl_conf_lines`); drop-ins and environment files by systemd's.

Output of the probe, one section per file: `=== <kind> <path>` then each line of the file
prefixed with `| ` (so no line of a file can pass for a header); kinds: home, conffile, dropin,
envfile. Every file is cut at FILE_LIMIT bytes and the whole output at TOTAL_LIMIT.
"""

from __future__ import annotations

import shlex
from typing import Any

from vfleet.config.quoting import shell_quote

from . import misc

FILE_LIMIT = 16384
TOTAL_LIMIT = 65536
KINDS = ("home", "conffile", "dropin", "envfile")
DROPIN_DIRS = ("/etc/systemd/system", "/run/systemd/system")
NCCL_READS = ("home", "conffile")  # the kinds NCCL parses itself (the rest is systemd's)
# NCCL_CONF_FILE of a drop-in's `Environment=` line or of an environment file's line (each printed
# as `| <line>`); a commented line (`#Environment=...`) sets nothing and is not followed.
CONF_FILE_SED = (
    r'''sed -n -e "s/^| *Environment=\(.*[ \"']\)\{0,1\}NCCL_CONF_FILE=[\"']\{0,1\}\([^\"' ]*\).*/\2/p"'''
    r''' -e "s/^| *\(export *\)\{0,1\}NCCL_CONF_FILE=[\"']\{0,1\}\([^\"' ]*\).*/\2/p"'''
)


def probe_command(
    user: str, unit: str, env_file: str, conf_files: tuple[str, ...] = (), dropin_dirs: tuple[str, ...] = DROPIN_DIRS
) -> str:
    """The probe: `user` the service account, `unit` the vLLM unit's file name, `env_file` the
    environment file vfleet writes (read by its own fact, so skipped here), `conf_files` the
    NCCL_CONF_FILE paths the inventory sets, `dropin_dirs` where systemd looks for the unit's
    drop-in folders (a parameter so that a test runs the probe on folders of its own).
    NCCL_CONF_FILE named by a drop-in or its environment files is followed too."""
    q = shell_quote
    dirs = " ".join(q(f"{d}/{unit}.d") for d in dropin_dirs)
    named = "".join(" " + q(p) for p in conf_files)
    return (
        'emit() { [ -f "$2" ] || return 0; printf \'=== %s %s\\n\' "$1" "$2"; '
        f"head -c {FILE_LIMIT} -- \"$2\" | sed 's/^/| /'; echo; }}\n"
        "{\n"
        f"home=$(getent passwd {q(user)} | cut -d: -f6)\n"
        '[ -n "$home" ] && emit home "$home/.nccl.conf"\n'
        f'units=$(for d in {dirs}; do for f in "$d"/*.conf; do\n'
        '  emit dropin "$f"\n'
        f'  [ -f "$f" ] && head -c {FILE_LIMIT} -- "$f" | sed -n \'s/^ *EnvironmentFile=-\\{{0,1\\}}//p\' |\n'
        f'    while IFS= read -r p; do [ "$p" = {q(env_file)} ] || emit envfile "$p"; done\n'
        "done; done)\n"
        "printf '%s\\n' \"$units\"\n"
        f"{{ printf '%s\\n'{named}\n"
        f"  printf '%s\\n' \"$units\" | {CONF_FILE_SED}\n"
        '} | sort -u | while IFS= read -r p; do [ -n "$p" ] && emit conffile "$p"; done\n'
        f"}} | head -c {TOTAL_LIMIT}"
    )


def nccl_conf_lines(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """({NCCL_*: value} NCCL sets from a configuration file's lines, [lines it ignores though they
    name an NCCL variable]), by param.cc setEnvFile's rule: '#' lines skipped, split at the first
    '=', name and value taken as they are."""
    found: dict[str, str] = {}
    ignored: list[str] = []
    for ln in lines:
        key, sep, value = ln.partition("=")
        if ln.startswith("#") or not sep:
            continue
        if key.startswith("NCCL_") and key == key.strip():
            found[key] = value
        elif key.strip().removeprefix("export").strip().startswith("NCCL_"):
            ignored.append(ln)
    return found, ignored


def _dropin_env(lines: list[str]) -> dict[str, str]:
    """NCCL_* of a drop-in's `Environment=` lines (each a shell-like list of KEY=VALUE words)."""
    out: dict[str, str] = {}
    for ln in lines:
        key, sep, value = ln.strip().partition("=")
        if not sep or key.strip() != "Environment":
            continue
        try:
            words = shlex.split(value)
        except ValueError:  # an unbalanced quote: systemd ignores the line too
            continue
        for w in words:
            k, eq, v = w.partition("=")
            if eq and k.startswith("NCCL_"):
                out[k] = v
    return out


def parse(output: str) -> list[dict[str, Any]]:
    """[{kind, path, vars: {NCCL_*: value}}] for each file the probe printed, in its order; the
    files NCCL reads itself add `ignored`: their lines that name an NCCL variable NCCL never sets."""
    sources: list[dict[str, Any]] = []
    body: list[str] = []
    for ln in (output or "").splitlines():
        if ln.startswith("=== "):
            kind, _, path = ln[4:].partition(" ")
            if kind in KINDS and path:
                body = []
                sources.append({"kind": kind, "path": path, "lines": body})
            continue
        if ln.startswith("| ") or ln == "|":
            body.append(ln[2:])
    for s in sources:
        lines = s.pop("lines")
        if s["kind"] in NCCL_READS:
            s["vars"], s["ignored"] = nccl_conf_lines(lines)
        else:
            s["vars"] = _dropin_env(lines) if s["kind"] == "dropin" else misc.env_file("\n".join(lines))
    return sources
