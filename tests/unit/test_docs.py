"""The documentation's links and commands are real.

Checked in README.md and docs/*.md (not docs/evidence/, which holds historical records):
- every relative link points to a file or folder that exists, and where it names an anchor
  (`page.md#section`, `#section`), to a heading of that page (GitHub's anchor rules);
- every `vfleet TASK ...` / `invoke TASK ...` written in a code span or code block names a task
  of the CLI's namespace, and every `--flag` after it is a flag of that task (Invoke spells an
  argument `foo_bar` as `--foo-bar`) or one of the core flags --help, --list, --version;
- every `make TARGET` in a code span or block is a target of the Makefile.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from vfleet.cli import namespace

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))

# Invoke's core flags the docs may use before or after a task name (takes a value?).
CORE_FLAGS = {
    "--help": "optional",
    "-h": "optional",
    "--list": "optional",
    "-l": "optional",
    "--version": False,
    "-V": False,
}

# Words that stand for a task in prose ("`vfleet X` and `invoke X`", "`vfleet --help TASK`").
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z0-9_]*|\.\.\.)$")


# ---- reading markdown -------------------------------------------------------------------


@dataclass
class Code:
    """A piece of code in a page: a code block's line or an inline code span."""

    path: Path
    line: int
    text: str
    block: bool = False  # a line of a code block (not an inline span)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def split_page(path: Path) -> tuple[list[Code], list[tuple[int, str]]]:
    """The page's code (blocks line by line, inline spans whole) and its prose lines with the
    inline code taken out, for link checks. Fenced (```) and indented (4 spaces after a blank
    line) blocks are code."""
    code: list[Code] = []
    prose: list[tuple[int, str]] = []
    lines = path.read_text().splitlines()
    fence = None
    in_indented = False
    prev_blank = True
    paragraph: list[tuple[int, str]] = []

    def flush():
        if not paragraph:
            return
        # Inline spans may run across a line break inside a paragraph: join the lines.
        joined, starts = "", []
        for n, text in paragraph:
            starts.append((len(joined), n))
            joined += text + "\n"
        for m in re.finditer(r"(`+)(.+?)\1", joined, re.S):
            n = max(line for pos, line in starts if pos <= m.start())
            code.append(Code(path, n, " ".join(m.group(2).split())))
        stripped = re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), joined, flags=re.S)
        for (pos, n), text in zip(starts, stripped.split("\n")):
            prose.append((n, text))
        paragraph.clear()

    for n, line in enumerate(lines, 1):
        if fence:
            if line.strip().startswith(fence):
                fence = None
            else:
                code.append(Code(path, n, line, block=True))
            prev_blank = False
            continue
        m = re.match(r"\s*(```+|~~~+)", line)
        if m:
            flush()
            fence = m.group(1)
            prev_blank = False
            continue
        if (in_indented or prev_blank) and line.startswith("    ") and line.strip() and not paragraph:
            in_indented = True
            code.append(Code(path, n, line, block=True))
            continue
        if in_indented and not line.strip():
            prev_blank = True
            continue
        in_indented = False
        if not line.strip():
            flush()
            prev_blank = True
            continue
        prev_blank = False
        paragraph.append((n, line))
    flush()
    return code, prose


PAGES = {path: split_page(path) for path in DOCS}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed,
    spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    code_lines = {c.line for c in PAGES[path][0] if c.block} if path in PAGES else set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m or n in code_lines:
            continue
        base = slug(m.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', path.read_text()):
        found.add(m.group(1))
    return found


LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")


def links(path: Path):
    for n, text in PAGES[path][1]:
        for m in LINK.finditer(text):
            yield n, m.group(1)
        m = REFDEF.match(text)
        if m:
            yield n, m.group(1)


def all_links():
    for path in DOCS:
        for n, target in links(path):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            yield pytest.param(path, n, target, id=f"{rel(path)}:{n}:{target}")


@pytest.mark.parametrize(("path", "line", "target"), list(all_links()))
def test_relative_link_points_to_something_that_exists(path, line, target):
    file_part, _, anchor = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path
    assert dest.exists(), f"{rel(path)}:{line}: link to {target}: {file_part} does not exist"
    if anchor and dest.suffix == ".md":
        assert anchor in anchors(dest), (
            f"{rel(path)}:{line}: link to {target}: {rel(dest)} has no heading for #{anchor}"
        )


def test_links_were_found():
    """The link reader works: the README links into docs/."""
    assert any(t.startswith("docs/") for _, t in links(ROOT / "README.md"))


# ---- commands ---------------------------------------------------------------------------


def _contexts():
    out = {}
    for ctx in namespace.to_contexts():
        for name in (ctx.name, *ctx.aliases):
            out[name] = ctx
    return out


CONTEXTS = _contexts()
COMMAND = re.compile(r"(?:^|(?<=[\s/;&|(`$]))(vfleet|invoke)[ \t]+(\S.*)$")
ENDS = {";", "&&", "||", "|", ">", ">>", "<", "2>", "&"}


def words(text: str) -> list[str]:
    text = text.split(" #", 1)[0]
    try:
        lex = shlex.shlex(text, posix=True, punctuation_chars=";&|<>()")
        lex.whitespace_split = True
        return list(lex)
    except ValueError:  # an unbalanced quote in prose: plain words will do
        return text.split()


def takes_value(ctx, flag: str):
    if ctx is None:
        return CORE_FLAGS.get(flag, False)
    arg = ctx.flags.get(flag)
    if arg is None:
        return CORE_FLAGS.get(flag, False)
    return "optional" if arg.optional else arg.takes_value


def check_command(tool: str, rest: str) -> list[str]:
    """Problems of one command line (empty: fine)."""
    problems: list[str] = []
    ws = words(rest.split("`", 1)[0])  # a command in a code block's `quote` ends there
    ctx = None
    i = 0
    while i < len(ws):
        w = ws[i]
        if w in ENDS or w == ")" or w.startswith("#"):
            break
        if w.startswith("-") and w != "-" and w != "--":
            flag = w.split("=", 1)[0]
            known = (ctx is not None and flag in ctx.flags) or flag in CORE_FLAGS
            if not known:
                where = f"task {ctx.name}" if ctx else tool
                problems.append(f"{flag} is not a flag of {where}")
            need = takes_value(ctx, flag)
            if "=" not in w and need:
                nxt = ws[i + 1] if i + 1 < len(ws) else None
                if need == "optional":
                    if nxt is not None and not nxt.startswith("-") and nxt not in ENDS:
                        if nxt in CONTEXTS:  # `vfleet --help deploy`
                            ctx = CONTEXTS[nxt]
                        i += 1
                else:
                    i += 1
            i += 1
            continue
        if w == "--":
            break
        if w in CONTEXTS:
            ctx = CONTEXTS[w]
        elif ctx is None:
            if PLACEHOLDER.match(w):
                return problems  # `vfleet X`, `vfleet TASK`: a placeholder, not a command
            problems.append(f"{w!r} is not a task")
            return problems
        # else: a positional value of the task (`bench.compare A B`)
        i += 1
    return problems


def joined(codes: list[Code]) -> list[Code]:
    """Code block lines with shell continuations (a trailing backslash) joined to the next."""
    out: list[Code] = []
    carry: Code | None = None
    carry_next = 0  # the line a continued line goes on at
    for c in codes:
        if carry is not None and c.block and c.line == carry_next:
            carry = Code(c.path, carry.line, carry.text[:-1] + " " + c.text.strip(), block=True)
        else:
            if carry is not None:
                out.append(carry)
            carry = c
        carry_next = c.line + 1
        if not (carry.block and carry.text.rstrip().endswith("\\")):
            out.append(carry)
            carry = None
        else:
            carry = Code(carry.path, carry.line, carry.text.rstrip(), block=True)
    if carry is not None:
        out.append(carry)
    return out


def commands():
    for path in DOCS:
        for c in joined(PAGES[path][0]):
            for m in COMMAND.finditer(c.text):
                before = c.text[: m.start()].split()
                if before and before[-1] in ("from", "import"):  # Python, not a shell line
                    continue
                yield pytest.param(c, m.group(1), m.group(2), id=f"{rel(path)}:{c.line}:{m.group(0)[:60]}")


ALL_COMMANDS = list(commands())


@pytest.mark.parametrize(("code", "tool", "rest"), ALL_COMMANDS)
def test_documented_command_exists(code, tool, rest):
    problems = check_command(tool, rest)
    assert not problems, f"{rel(code.path)}:{code.line}: `{tool} {rest}`: " + "; ".join(problems)


def test_commands_were_found():
    assert len(ALL_COMMANDS) > 20
    assert check_command("vfleet", "deploy --inventory x.yaml --check --diff") == []
    assert check_command("vfleet", "--help drain") == []
    assert check_command("vfleet", "deploy --no-such-flag") == ["--no-such-flag is not a flag of task deploy"]
    assert check_command("vfleet", "deploi --check") == ["'deploi' is not a task"]
    assert check_command("vfleet", "restart --batch 1 && vfleet nonsense") == []  # the second is its own match


# ---- make targets -----------------------------------------------------------------------


def make_targets() -> set[str]:
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.$()/-][^:=\s]*(?:\s+[^:=\s]+)*)\s*::?(?!=)", line)
        if m and not line.startswith("\t"):
            targets.update(m.group(1).split())
    return targets


def make_uses():
    for path in DOCS:
        for c in joined(PAGES[path][0]):
            for m in re.finditer(r"(?:^|(?<=[\s;&|(`]))make((?:[ \t]+[A-Za-z][\w.-]*)+)", c.text):
                for target in m.group(1).split():
                    if "=" in target:
                        continue
                    yield pytest.param(c, target, id=f"{rel(path)}:{c.line}:make {target}")


@pytest.mark.parametrize(("code", "target"), list(make_uses()))
def test_documented_make_target_exists(code, target):
    assert target in make_targets(), f"{rel(code.path)}:{code.line}: `make {target}`: no such target in the Makefile"
