"""Proofs about host paths before vfleet removes, renames or relinks them.

Why: the roles build paths from inventory values (model_dir + model_name, vllm_root + a
venv name, an explicit model_path) and then run `rm -rf`, `mv -T` and `ln -sfn` on them. A
value like `model_path: /bin` once made a deploy replace Debian's /bin symlink (the host lost
/bin/sh, then SSH). So before such an operation the path is proven to be vfleet's own:

- `inside(root, path)`: the normalised path lies strictly under the root (no `..` escape)
  and is at least two levels deep (never `/x`), so it cannot be a top-level system path and,
  being absolute, never reads as a command option either;
- `replaceable_link(...)`: an existing symlink is replaced only when its current target lies
  inside vfleet's root (a link vfleet made); anything else fails the host with one line.

Pure functions on strings (no host): the facts come from vfleet.engine.facts.LinkFact.
"""

from __future__ import annotations

import posixpath

from vfleet.engine.changes import Change, symlink_change
from vfleet.engine.runner import HostFailed

__all__ = [
    "MIN_DEPTH",
    "depth",
    "deep_path",
    "inside",
    "link_target",
    "replaceable_link",
    "owned_symlink_change",
    "plain_operand",
]

# /srv/models/x is fine, /bin or /x is not: top-level names belong to the system.
MIN_DEPTH = 2


def depth(path: str) -> int:
    """Components of a normalised absolute path: `/` is 0, `/bin` is 1, `/srv/models` is 2."""
    return len([p for p in posixpath.normpath(path).split("/") if p])


def plain_operand(value: str, what: str) -> str:
    """The value, proven not to read as an option where a program takes no `--` (an ssh host,
    a user name in user@host): one line naming the variable otherwise."""
    if not value or value.startswith("-"):
        raise HostFailed(
            f"{what} {value!r} starts with '-' (a command would read it as an option); fix it in the inventory"
        )
    return value


def deep_path(path: str, what: str) -> str:
    """`path` normalised, proven absolute and at least MIN_DEPTH deep."""
    p = posixpath.normpath(path)
    if not path.startswith("/"):
        raise HostFailed(f"{what} {path!r} is not an absolute path; fix it in the inventory")
    if depth(p) < MIN_DEPTH:
        raise HostFailed(
            f"{what} {path!r} is a top-level path; vfleet changes only paths at least "
            f"{MIN_DEPTH} levels deep: fix it in the inventory"
        )
    return p


def inside(root: str, path: str, what: str) -> str:
    """`path` normalised, proven absolute, strictly under `root` (itself absolute, not `/`)
    and at least MIN_DEPTH deep; HostFailed (one line naming `what`) otherwise."""
    r = posixpath.normpath(root)
    p = posixpath.normpath(path)
    if not root.startswith("/") or r == "/":
        raise HostFailed(f"{what}: root {root!r} must be an absolute folder other than /; fix it in the inventory")
    if not path.startswith("/") or p == r or posixpath.commonpath([r, p]) != r:
        raise HostFailed(
            f"{what} {path!r} is not inside {r} (after resolving '..'); vfleet changes nothing "
            f"outside its own folders: fix it in the inventory"
        )
    return deep_path(p, what)


def link_target(link: str, target: str) -> str:
    """Where a symlink's target points, as an absolute normalised path (a relative target is
    relative to the link's folder; `readlink` prints it as stored)."""
    return posixpath.normpath(target if target.startswith("/") else posixpath.join(posixpath.dirname(link), target))


def replaceable_link(link: str, current: str | None, root: str, what: str) -> None:
    """Refuse to replace `link` unless it is missing or a symlink into `root` (one vfleet made).
    `current` is LinkFact's value: None (missing), 'OTHER' (not a link) or the target."""
    deep_path(link, what)
    if current is None:
        return
    if current == "OTHER":
        raise HostFailed(
            f"{what} {link} exists and is not a symlink; vfleet replaces only its own links: "
            f"move it away or choose another {what}"
        )
    r = posixpath.normpath(root)
    t = link_target(link, current)
    if r == "/" or t == r or posixpath.commonpath([r, t]) != r:
        raise HostFailed(
            f"{what} {link} is a symlink to {current}, outside {r}: vfleet did not make it and "
            f"will not replace it; move it away or choose another {what}"
        )


def owned_symlink_change(
    link: str, target: str, current: str | None, *, root: str, what: str, notify: str | None = None
) -> list[Change]:
    """symlink_change, after proving that the link may be replaced and that its new target
    lies inside `root`."""
    replaceable_link(link, current, root, what)
    inside(root, target, f"{what} target")
    return symlink_change(link, target, current, notify=notify)
