"""Host ranges (`gpu[01:16]`) and `--limit` patterns, with Ansible's semantics.

Kept apart from inventory loading because both the loader (ranges in host names) and every
task (`--limit`) need them, and because pattern rules are easy to get subtly wrong: a small
module with its own tests is the cheapest way to keep them exactly like Ansible's.
"""
from __future__ import annotations

import difflib
import fnmatch
import re
import string

from vfleet.engine.errors import VfleetError

__all__ = ["expand_host_range", "has_host_range", "host_range_size", "match_limit",
           "split_limit", "MAX_LIMIT_RANGE"]

# A --limit range is compared with the inventory's names, so it is expanded; this bounds it.
MAX_LIMIT_RANGE = 1_000_000

# One bracketed range: [start:end] or [start:end:step]; start may be empty (= 0), as in Ansible.
_RANGE = re.compile(r"\[([^\[\]]*)\]")


def has_host_range(pattern: str) -> bool:
    """True when a host name holds a `[a:b]` range, so the loader knows to expand it."""
    return any(":" in m.group(1) for m in _RANGE.finditer(pattern))


def host_range_size(pattern: str) -> int:
    """How many names a pattern expands to, without expanding it: the loader checks this
    against its host limit first, because `gpu[0:10000000]` would otherwise fill memory."""
    size, rest = 1, pattern
    while True:
        match = next((m for m in _RANGE.finditer(rest) if ":" in m.group(1)), None)
        if match is None:
            expand_host_range(rest)   # the same errors as expanding would give
            return size
        parts = match.group(1).split(":")
        beg, end = (parts[0].strip() or "0"), (parts[1].strip() if len(parts) > 1 else "")
        step = parts[2].strip() if len(parts) == 3 else "1"
        if (len(parts) in (2, 3) and step.isdigit() and int(step) >= 1
                and beg.isdigit() and end.isdigit() and int(beg) <= int(end)):
            size *= (int(end) - int(beg)) // int(step) + 1
        else:
            size *= len(_expand_one(pattern, match.group(1)))   # letters: at most 52
        rest = rest[: match.start()] + "x" + rest[match.end():]


def expand_host_range(pattern: str) -> list[str]:
    """Expand Ansible host ranges: `gpu[01:16]`, `node-[a:c]`, `h[1:10:2]`, several per name.

    Zero padding of the start is kept (`[01:16]` gives `01`..`16`), as Ansible does, because
    fleets name hosts that way. Unlike Ansible, a range that would expand to nothing (start
    after end) is an error: an inventory that silently loses hosts is worse than one that
    refuses to load. Errors are ValueError with a message that quotes the pattern.
    """
    match = next((m for m in _RANGE.finditer(pattern) if ":" in m.group(1)), None)
    if match is None:
        if "[" in pattern or "]" in pattern:
            raise ValueError(f"host range '{pattern}': expected [start:end] or [start:end:step]")
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end():]
    if "[" in head or "]" in head:
        raise ValueError(f"host range '{pattern}': unbalanced brackets")
    items = _expand_one(pattern, match.group(1))
    out: list[str] = []
    for item in items:
        out.extend(expand_host_range(head + item + tail))
    return out


def _expand_one(pattern: str, body: str) -> list[str]:
    """Expand the inside of one bracket ("01:16", "a:c", "1:10:2") to its items."""
    parts = body.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"host range '{pattern}': expected [start:end] or [start:end:step]")
    beg, end = parts[0].strip() or "0", parts[1].strip()
    step_txt = parts[2].strip() if len(parts) == 3 else "1"
    if not end:
        raise ValueError(f"host range '{pattern}': missing end")
    if not step_txt.isdigit() or int(step_txt) < 1:
        raise ValueError(f"host range '{pattern}': step must be a whole number >= 1")
    step = int(step_txt)
    if beg.isdigit() and end.isdigit():
        if beg.startswith("0") and len(beg) > 1 and len(beg) != len(end):
            raise ValueError(
                f"host range '{pattern}': zero-padded start and end must have the same width"
            )
        if int(beg) > int(end):
            raise ValueError(f"host range '{pattern}': start after end")
        width = len(beg) if beg.startswith("0") and len(beg) > 1 else 0
        return [str(i).zfill(width) for i in range(int(beg), int(end) + 1, step)]
    letters = string.ascii_letters
    if len(beg) == 1 and len(end) == 1 and beg in letters and end in letters:
        if beg.islower() != end.islower():
            raise ValueError(f"host range '{pattern}': start and end must be the same case")
        if beg > end:
            raise ValueError(f"host range '{pattern}': start after end")
        return [chr(c) for c in range(ord(beg), ord(end) + 1, step)]
    raise ValueError(
        f"host range '{pattern}': start and end must both be numbers or both single letters"
    )


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


def _match_term(term: str, hosts: list[str], groups: dict[str, list[str]]) -> list[str]:
    """Hosts one positive term names: exact group/host, '~regex', range, or fnmatch glob."""
    if term in ("all", "*"):
        return list(hosts)
    if term in groups:
        return list(groups[term])
    if term in hosts:
        return [term]
    if term.startswith("~"):
        try:
            rx = re.compile(term[1:])
        except re.error as exc:
            raise VfleetError(f"--limit '{term}': bad regular expression: {exc}") from None
        found = [g for g in groups if rx.match(g)]
        return _union([h for h in hosts if rx.match(h)], *(groups[g] for g in found))
    if has_host_range(term):
        try:
            if host_range_size(term) > MAX_LIMIT_RANGE:
                raise ValueError(f"host range '{term}' expands to more than "
                                 f"{MAX_LIMIT_RANGE} names; use a glob such as 'gpu*'")
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
    terms = split_limit(limit)
    if not terms:
        raise VfleetError("--limit is empty; give host or group names, globs or '~regex'")
    plain = [t for t in terms if t[0] not in "!&"]
    inter = [t[1:] for t in terms if t[0] == "&"]
    excl = [t[1:] for t in terms if t[0] == "!"]
    matched: dict[str, list[str]] = {}
    for term in plain + inter + excl:
        found = _match_term(term, hosts, groups)
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
    msg = f"--limit '{term}' matches no host or group in {source}; known groups: {', '.join(known)}"
    close = difflib.get_close_matches(term, list(groups) + list(hosts), n=1, cutoff=0.6)
    if close:
        msg += f"; did you mean '{close[0]}'?"
    return msg
