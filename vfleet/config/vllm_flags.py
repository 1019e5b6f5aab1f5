"""Every option string a vLLM release's `vllm serve` accepts, read from its captured
`--help=all` (vfleet/config/data/vllm-<version>-help.txt), and how vLLM's own parser reads a
word of the command line.

Why: vllm_extra_args is appended to the command line vfleet renders, and argparse takes the
last value of a flag, a unique prefix of a flag (`--api-k`), a short alias (`-tp`), `_` for `-`
and `--flag=value`; vLLM's FlexibleArgumentParser adds `-O3` and dotted JSON keys
(`--compilation-config.mode 3`). To know which flag a word really sets, it has to be read the
way vLLM reads it (vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args; Python's
argparse `_parse_optional` / `_get_option_tuples`, allow_abbrev left on).

A release without a capture has no authoritative list: its words are read against the union of
the captured lists, which is enough to recognise the flags vfleet manages or refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from vfleet.config.vllm_facts import parse_version

__all__ = ["FlagList", "Reading", "flag_list", "read_word", "captured_versions"]

DATA_DIR = Path(__file__).parent / "data"
_HELP_FILE = re.compile(r"vllm-(\d+\.\d+\.\d+)-help\.txt")
# an option line of argparse's help: two spaces, then the option strings and their metavars
_OPTION_LINE = re.compile(r"^  (-\S.*?)(?:\s{2,}.*)?$")
# argparse's _negative_number_matcher: such a word is a value, not an option
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


@dataclass(frozen=True)
class FlagList:
    """Option string -> the canonical (first long) option of its argument; `--no-x` forms map
    to `--x` and are listed in `negative`. `authoritative`: the capture of this very release."""

    options: dict[str, str]
    negative: frozenset[str]
    authoritative: bool

    def candidates(self, name: str) -> list[str]:
        """Option strings argparse would take `name` for: itself, or every option it is a
        prefix of (argparse's abbreviation; ambiguous when several arguments remain)."""
        if name in self.options:
            return [name]
        return sorted(o for o in self.options if o.startswith(name))


@dataclass(frozen=True)
class Reading:
    """How vLLM reads one word of vllm_extra_args."""

    word_index: int
    spelled: str  # the option part as written, never the value
    options: tuple[str, ...]  # option strings it may resolve to (one: unambiguous)
    canonical: tuple[str, ...]  # their canonical flags, deduplicated

    @property
    def negative(self) -> bool:
        return bool(self.options) and all(o.startswith("--no-") for o in self.options)


def _parse_help(text: str) -> tuple[dict[str, str], set[str]]:
    options: dict[str, str] = {}
    negative: set[str] = set()
    for line in text.splitlines():
        m = _OPTION_LINE.match(line)
        if not m:
            continue
        strings = [part.split()[0] for part in re.split(r",\s+", m.group(1)) if part.strip().startswith("-")]
        longs = [s for s in strings if s.startswith("--") and not s.startswith("--no-")]
        canonical = longs[0] if longs else strings[0]
        for s in strings:
            if s.startswith("--no-") and "--" + s[5:] in strings:
                options[s] = "--" + s[5:]
                negative.add(s)
            else:
                options[s] = canonical
    options.pop("-h", None)
    options.pop("--help", None)
    return options, negative


@lru_cache(maxsize=None)
def _captures() -> dict[str, tuple[dict[str, str], frozenset[str]]]:
    out = {}
    for path in sorted(DATA_DIR.glob("vllm-*-help.txt")):
        m = _HELP_FILE.fullmatch(path.name)
        if m:
            opts, neg = _parse_help(path.read_text(encoding="utf-8"))
            out[m.group(1)] = (opts, frozenset(neg))
    return out


def captured_versions() -> list[str]:
    return sorted(_captures(), key=lambda v: parse_version(v) or ())


@lru_cache(maxsize=64)
def flag_list(version: str | None) -> FlagList:
    """The release's own list when its help is captured (`0.32.0+cpu` counts as 0.32.0), else
    the union of every capture, not authoritative."""
    pv = parse_version(version)
    for v, (opts, neg) in _captures().items():
        if pv is not None and parse_version(v) == pv:
            return FlagList(opts, neg, True)
    union: dict[str, str] = {}
    negs: set[str] = set()
    for opts, neg in _captures().values():
        union.update(opts)
        negs |= neg
    return FlagList(union, frozenset(negs), False)


def _option_name(word: str) -> str:
    """The option part of a word the way FlexibleArgumentParser rewrites it: before `=`, before
    the first `.` of a dotted JSON key, `_` read as `-` (long options), a list `+` dropped."""
    name = word.split("=", 1)[0].split(".", 1)[0].rstrip("+")
    if name.startswith("--"):
        name = "--" + name[2:].replace("_", "-")
    return name


def _short_candidates(word: str, flags: FlagList) -> list[str]:
    """argparse on a single-dash word: `-tp`, `-tp=2`, `-q` with its value attached (`-qawq`),
    or the unique short option it is a prefix of (`-t` -> `-tp`)."""
    name = _option_name(word)
    if name in flags.options:
        return [name]
    if word[:2] in flags.options:
        return [word[:2]]
    return sorted(o for o in flags.options if o.startswith(name) and not o.startswith("--"))


def _candidates(word: str, name: str, flags: FlagList) -> list[str]:
    if word.startswith("--"):
        return flags.candidates(name) if len(name) > 2 else []
    return _short_candidates(word, flags)


def read_word(index: int, word: str, flags: FlagList) -> Reading | None:
    """The option a word sets, or None when vLLM reads it as a value or positional."""
    if not word.startswith("-") or word == "-" or _NEGATIVE_NUMBER.match(word):
        return None
    if word.startswith("-O") and not word.startswith("--"):
        return Reading(index, "-O", ("--optimization-level",), ("--optimization-level",))
    name = _option_name(word)
    found = _candidates(word, name, flags)
    if not found and name != name.lower():
        # argparse is case-sensitive and would refuse `--PORT`; read it as `--port` anyway, so
        # the rules below name what it was meant to set (and a secret is never let through)
        found = _candidates(word.lower(), name.lower(), flags)
    canonical = tuple(dict.fromkeys(flags.options[o] for o in found))
    return Reading(index, name, tuple(found), canonical)
