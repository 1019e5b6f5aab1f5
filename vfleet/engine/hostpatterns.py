"""Host ranges (`gpu[01:16]`) and `--limit` patterns, with Ansible's semantics.

Kept apart from inventory loading because both the loader (ranges in host names) and every
task (`--limit`) need them, and because pattern rules are easy to get subtly wrong: a small
module with its own tests is the cheapest way to keep them exactly like Ansible's.
"""

from __future__ import annotations

import difflib
import fnmatch
import itertools
import math
import re
import string
import time
from dataclasses import dataclass
from typing import Callable

from vfleet.engine.errors import VfleetError

__all__ = [
    "expand_host_range",
    "has_host_range",
    "host_range_size",
    "match_limit",
    "split_limit",
    "quoted",
    "MAX_LIMIT_RANGE",
    "MAX_LIMIT_REGEX",
]

# A --limit range is compared with the inventory's names, so it is expanded; this bounds it.
MAX_LIMIT_RANGE = 1_000_000
# A `~regex` term runs on every host and group name with Python's backtracking `re`, which has
# no time limit: a pattern such as `(a+)+$` takes exponential time on a name of 30 a's. So a
# regex is short (names are: DNS allows 253 characters) and the shapes that backtrack
# without bound are refused before it runs (`_regex_hazard`).
MAX_LIMIT_REGEX = 200
MAX_REGEX_REPEATS = 3  # `a*a*a*b` on a 253-character name: 15 ms; a fourth multiplies that
LIMIT_REGEX_SECONDS = 10.0  # and, whatever slipped through, a regex gives up after this long
# Each glob or regex term is tried on every name; exact names and groups are looked up.
MAX_LIMIT_PATTERNS = 100
MAX_LIMIT_LENGTH = 100_000

# One bracketed range: [start:end] or [start:end:step]; start may be empty (= 0), as in Ansible.
_RANGE = re.compile(r"\[([^\[\]]*)\]")

# Digits a range's start, end or step may have: more is a typo, and Python itself refuses to
# read a number of thousands of digits (with a message about sys.set_int_max_str_digits).
_MAX_DIGITS = 18


@dataclass(frozen=True)
class _Range:
    """One checked bracket: numbers (letters as their code points) from start to end by step."""

    start: int
    end: int
    step: int
    width: int = 0  # the zero padding of `[01:16]`
    letters: bool = False

    @property
    def count(self) -> int:
        return (self.end - self.start) // self.step + 1

    def items(self) -> list[str]:
        values = range(self.start, self.end + 1, self.step)
        return [chr(v) for v in values] if self.letters else [str(v).zfill(self.width) for v in values]


def has_host_range(pattern: str) -> bool:
    """True when a host name holds a `[a:b]` range, so the loader knows to expand it."""
    return any(":" in m.group(1) for m in _RANGE.finditer(pattern))


def host_range_size(pattern: str) -> int:
    """How many names a pattern expands to, without expanding it: the loader checks this
    against its host limit first, because `gpu[0:10000000]` would otherwise fill memory.
    Raises the same errors as expanding would."""
    return math.prod(r.count for r in _parse(pattern)[1])


def expand_host_range(pattern: str) -> list[str]:
    """Expand Ansible host ranges: `gpu[01:16]`, `node-[a:c]`, `h[1:10:2]`, several per name.

    Zero padding of the start is kept (`[01:16]` gives `01`..`16`), as Ansible does, because
    fleets name hosts that way. Unlike Ansible, a range that would expand to nothing (start
    after end) is an error: an inventory that silently loses hosts is worse than one that
    refuses to load. Errors are ValueError with a one-line message that quotes the pattern
    (control characters escaped, cut when long) and says what a range takes.
    """
    texts, ranges = _parse(pattern)
    out: list[str] = []
    for items in itertools.product(*(r.items() for r in ranges)):
        out.append(texts[0] + "".join(item + text for item, text in zip(items, texts[1:])))
    return out


def _parse(pattern: str) -> tuple[list[str], list[_Range]]:
    """The text around the ranges (one piece more than ranges) and the ranges, checked: the
    one place a pattern's errors come from, so counting and expanding refuse the same."""
    matches = [m for m in _RANGE.finditer(pattern) if ":" in m.group(1)]
    bounds = [0] + [i for m in matches for i in (m.start(), m.end())] + [len(pattern)]
    texts = [pattern[a:b] for a, b in zip(bounds[::2], bounds[1::2])]
    if any("[" in t or "]" in t for t in texts):
        why = "unbalanced brackets" if matches else "expected [start:end] or [start:end:step]"
        raise ValueError(f"host range {quoted(pattern)}: {why}")
    return texts, [_range(pattern, m.group(1)) for m in matches]


def _range(pattern: str, body: str) -> _Range:
    """Check the inside of one bracket ("01:16", "a:c", "1:10:2")."""

    def bad(why: str) -> ValueError:
        return ValueError(f"host range {quoted(pattern)}: {why}")

    parts = [p.strip() for p in body.split(":")]
    if len(parts) not in (2, 3):
        raise bad("expected [start:end] or [start:end:step]")
    beg, end, step_txt = parts[0] or "0", parts[1], parts[2] if len(parts) == 3 else "1"
    if not end:
        raise bad("missing end")
    if not _is_number(step_txt) or int(step_txt) < 1:
        raise bad(f"step must be a whole number >= 1 (of at most {_MAX_DIGITS} digits)")
    step = int(step_txt)
    if _is_number(beg) and _is_number(end):
        if beg.startswith("0") and len(beg) > 1 and len(beg) != len(end):
            raise bad("zero-padded start and end must have the same width (write [01:16], not [01:100])")
        if int(beg) > int(end):
            raise bad("start after end")
        return _Range(int(beg), int(end), step, len(beg) if beg.startswith("0") else 0)
    letters = string.ascii_letters
    if len(beg) == 1 and len(end) == 1 and beg in letters and end in letters:
        if beg.islower() != end.islower():
            raise bad("start and end must be the same case")
        if beg > end:
            raise bad("start after end")
        return _Range(ord(beg), ord(end), step, letters=True)
    raise bad(
        f"start and end must both be numbers or both single letters (numbers: at most "
        f"{_MAX_DIGITS} digits 0-9; letters: a-z or A-Z)"
    )


def quoted(pattern: str, limit: int = 80) -> str:
    """A pattern as an error message shows it: quoted, control characters escaped (a newline
    in a YAML key must not break the one-line error), and cut after `limit` characters (a
    pasted 10,000-character key must not either)."""
    return repr(pattern if len(pattern) <= limit else pattern[:limit] + "...")


def _is_number(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes '²' and '١', which int() reads differently
    or not at all, and a host named from them is not what the operator wrote."""
    return text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS


def split_limit(limit: str) -> list[str]:
    """Split a limit into terms like Ansible: on commas if any, else on colons outside brackets."""
    if "," in limit:
        terms = limit.split(",")
    else:
        terms, depth, cur = [], 0, ""
        for ch in limit:
            depth += ch == "["
            depth -= ch == "]"
            if ch == ":" and depth == 0:
                terms.append(cur)
                cur = ""
            else:
                cur += ch
        terms.append(cur)
    return [t.strip() for t in terms if t.strip()]


# What a regex is read as by `_regex_hazard`: an escape, a character class, a group's start
# (with its extension, e.g. `(?:`), a group's end, a quantifier, an alternation bar.
_REGEX_TOKEN = re.compile(
    r"\\(?:\d+|.)|\[\^?\]?(?:\\.|[^\]\\])*\]|\((?:\?P?<?[=!]?[A-Za-z_]*>?:?)?"
    r"|\)|\{\d*(?:,\d*)?\}\??|[*+?]\??|\||.",
    re.S,
)
_BACKREF = re.compile(r"\\[1-9]|\(\?P=")


def _regex_hazard(pattern: str) -> str | None:
    """Why `pattern` could backtrack without bound, or None. Refused: a backreference, and a
    repeated group that itself holds a repetition or an alternation (`(a+)+`, `(a|a)*`,
    `(.*x){9}`): the classic catastrophic shapes. Repetitions side by side (`a*a*`) stay
    polynomial, and names are short."""
    if _BACKREF.search(pattern):
        return "backreferences are not allowed"
    stack: list[bool] = []  # per open group: does it hold a repetition or a '|'?
    closed = False  # the previous token closed a group that holds one
    tokens = _REGEX_TOKEN.findall(pattern)
    if sum(tok[0] in "*+{" and tok != "{}" for tok in tokens) > MAX_REGEX_REPEATS:
        return (
            f"more than {MAX_REGEX_REPEATS} repetitions (*, +, {{m,n}}): each one more multiplies "
            "the work by the name's length"
        )
    for tok in tokens:
        repeat = tok[0] in "*+?" or (tok[0] == "{" and tok != "{}")
        if repeat and closed and tok[0] != "?":  # an optional group runs once or not at all
            return "a repeated group holds a repetition or an alternation (nested quantifiers)"
        closed = False
        if tok.startswith("("):
            stack.append(False)
        elif tok == ")" and stack:
            closed = stack.pop()
            if stack:
                stack[-1] = stack[-1] or closed
        elif (repeat or tok == "|") and stack:
            stack[-1] = True
    return None


def _compile_limit_regex(term: str) -> re.Pattern:
    """A `~regex` term, checked: its length, its shape, its syntax (one-line errors)."""
    pattern = term[1:]
    if len(pattern) > MAX_LIMIT_REGEX:
        raise VfleetError(
            f"--limit {quoted(term)}: a regular expression may have at most "
            f"{MAX_LIMIT_REGEX} characters; use a shorter one or a glob such as 'gpu*'"
        )
    hazard = _regex_hazard(pattern)
    if hazard:
        raise VfleetError(
            f"--limit {quoted(term)}: refused, it could run for hours ({hazard}); "
            "write it without that, or use a glob such as 'gpu*'"
        )
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise VfleetError(f"--limit {quoted(term)}: bad regular expression: {exc}") from None


def _timed(term: str, rx: re.Pattern) -> Callable[[str], bool]:
    """rx.match with a deadline over all the names it is tried on: one line, not a hung run."""
    deadline = time.monotonic() + LIMIT_REGEX_SECONDS

    def match(name: str) -> bool:
        if time.monotonic() > deadline:
            raise VfleetError(
                f"--limit {quoted(term)}: the regular expression took more than "
                f"{LIMIT_REGEX_SECONDS:g} s over the inventory's names; simplify it or use a glob"
            )
        return rx.match(name) is not None

    return match


def _match_term(term: str, hosts: list[str], host_set: set[str], groups: dict[str, list[str]]) -> list[str]:
    """Hosts one positive term names: exact group/host, '~regex', range, or fnmatch glob."""
    if term in ("all", "*"):
        return list(hosts)
    if term in groups:
        return list(groups[term])
    if term in host_set:
        return [term]
    if term.startswith("~"):
        match = _timed(term, _compile_limit_regex(term))
        found = [g for g in groups if match(g)]
        return _union([h for h in hosts if match(h)], *(groups[g] for g in found))
    if has_host_range(term):
        try:
            if host_range_size(term) > MAX_LIMIT_RANGE:
                raise ValueError(
                    f"host range {quoted(term)} expands to more than {MAX_LIMIT_RANGE} names; use a glob such as 'gpu*'"
                )
            names = set(expand_host_range(term))
        except ValueError as exc:
            raise VfleetError(f"--limit: {exc}") from None
        return [h for h in hosts if h in names]
    found = [g for g in groups if fnmatch.fnmatchcase(g, term)]
    return _union([h for h in hosts if fnmatch.fnmatchcase(h, term)], *(groups[g] for g in found))


def _union(*lists: list[str]) -> list[str]:
    out: dict[str, None] = {}
    for lst in lists:
        out.update(dict.fromkeys(lst))
    return list(out)


def match_limit(
    limit: str,
    hosts: list[str],
    groups: dict[str, list[str]],
    *,
    source: str = "the inventory",
) -> list[str]:
    """Hosts selected by an Ansible `--limit`, in inventory order.

    `groups` maps each group to all its hosts (descendants included). Terms are host or group
    names, globs, `~regex`, host ranges; `&term` intersects, `!term` removes; as in Ansible,
    plain terms are united first, then intersections, then exclusions, whatever the order
    written, and a limit of only exclusions starts from all hosts. A term that matches
    nothing is an error (Ansible only warns): a typo in `!gpu07` would otherwise run on the
    host the operator meant to spare. `source` names the inventory in that error.
    """
    if len(limit) > MAX_LIMIT_LENGTH:
        raise VfleetError(
            f"--limit has {len(limit):,} characters, more than {MAX_LIMIT_LENGTH:,}; name groups instead of hosts"
        )
    terms = split_limit(limit)
    if not terms:
        raise VfleetError("--limit is empty; give host or group names, globs or '~regex'")
    host_set = set(hosts)
    patterns = [t for t in terms if t.lstrip("!&") not in groups and t.lstrip("!&") not in host_set]
    if len(patterns) > MAX_LIMIT_PATTERNS:
        raise VfleetError(
            f"--limit has {len(patterns)} globs, regexes or ranges, more than "
            f"{MAX_LIMIT_PATTERNS} (each is tried on every host); name groups instead"
        )
    plain = [t for t in terms if t[0] not in "!&"]
    inter = [t[1:] for t in terms if t[0] == "&"]
    excl = [t[1:] for t in terms if t[0] == "!"]
    matched: dict[str, list[str]] = {}
    for term in plain + inter + excl:
        found = _match_term(term, hosts, host_set, groups)
        if not found:
            raise VfleetError(_no_match_message(term, hosts, groups, source))
        matched[term] = found
    selected = set(_union(*(matched[t] for t in plain))) if plain else set(hosts)
    for term in inter:
        selected &= set(matched[term])
    for term in excl:
        selected -= set(matched[term])
    return [h for h in hosts if h in selected]


def _no_match_message(term: str, hosts: list[str], groups: dict[str, list[str]], source: str) -> str:
    known = sorted(groups)
    msg = f"--limit {quoted(term)} matches no host or group in {source}; known groups: {', '.join(known)}"
    close = difflib.get_close_matches(term, list(groups) + list(hosts), n=1, cutoff=0.6)
    if close:
        msg += f"; did you mean '{close[0]}'?"
    return msg
