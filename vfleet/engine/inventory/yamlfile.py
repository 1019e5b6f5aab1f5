"""Reading YAML inventory and vars files: line numbers, duplicate keys, hostile input.

PyYAML's SafeLoader is the parser (no hand-written YAML); this subclass adds what an
operator-facing loader needs on top of it:

- the line of every mapping key, so errors say where to look;
- duplicate keys, which PyYAML silently resolves to the last one;
- a cap on alias expansion ("billion laughs"): PyYAML shares aliased nodes, but everything
  downstream (merging, JSON, jsonschema) walks the expanded tree, so a 1 KiB file could
  need gigabytes; the cap is counted while composing, before anything is built;
- a cap on nesting, and enough Python stack to reach it: PyYAML composes recursively and
  200 nested groups (which Ansible parses) is ~400 levels of mappings;
- construction without recursion: mappings are built by generators (deep=False), the
  way PyYAML builds its own, so nesting costs no Python frames there;
- `!vault` values refused with a message saying what to do instead;
- integers too long to print refused (Python refuses str() of an int over 4300 digits, so a
  5000-digit number would fail later, in a message or a JSON report, as a traceback), and
  lone surrogates ("\\udc80" is a valid YAML escape, but not text: writing it to a file or a
  terminal raises UnicodeEncodeError) refused in every key and value, with the line.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator

import yaml

from vfleet.engine.inventory.tree import copy_tree

__all__ = [
    "LineMap",
    "parse_yaml",
    "YamlProblem",
    "plain",
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "MAX_INT_BITS",
    "has_surrogate",
]

MAX_ALIAS_NODES = 100_000  # nodes aliases may add to a document once expanded
MAX_DEPTH = 500  # nested mappings/lists in one document (200 groups need ~405)
MAX_INT_BITS = 14_000  # ~4200 decimal digits: under Python's 4300-digit str() limit
_FRAMES_PER_LEVEL = 4  # Python frames PyYAML's composer (and our hook) uses per level


def has_surrogate(text: str) -> bool:
    """True when a string holds a lone surrogate (it cannot be encoded as UTF-8)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class YamlProblem(Exception):
    """A document refused for a reason of ours (not a syntax error): message and line."""

    def __init__(self, message: str, line: int | None):
        super().__init__(message)
        self.message, self.line = message, line


class LineMap(dict):
    """A mapping that remembers the line of each key, for error messages."""

    lines: dict[Any, int]


class _LineLoader(yaml.SafeLoader):
    """SafeLoader with key lines, duplicate keys, and the alias and depth caps."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.duplicates: list[tuple[Any, int]] = []
        self._depth = 0
        self._alias_nodes = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            line = self.peek_event().start_mark.line + 1
            node = super().compose_node(parent, index)
            self._alias_nodes += getattr(node, "vf_size", 1)
            if self._alias_nodes > MAX_ALIAS_NODES:
                raise YamlProblem(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES} values "
                    "(an alias bomb?); write the values out instead",
                    line,
                )
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            line = self.peek_event().start_mark.line + 1
            raise YamlProblem(f"nested more than {MAX_DEPTH} levels deep", line)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        node.vf_size = 1 + sum(_child_sizes(node))
        if isinstance(node, yaml.ScalarNode) and has_surrogate(node.value):
            raise YamlProblem(
                "a lone surrogate escape (like \\udc80) is not text; write the character itself, or remove it",
                node.start_mark.line + 1,
            )
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """PyYAML's int, refusing one too long to print (see MAX_INT_BITS)."""
        too_long = YamlProblem(
            "an integer too long to use (more than 4000 digits); no setting takes one: check the value",
            node.start_mark.line + 1,
        )
        try:
            value = super().construct_yaml_int(node)
        except ValueError:
            raise too_long from None
        if value.bit_length() > MAX_INT_BITS:
            raise too_long
        return value

    def construct_line_map(self, node: yaml.MappingNode) -> Iterator[LineMap]:
        out = LineMap()
        out.lines = {}
        yield out
        # Lines and duplicates from the keys as written, before '<<' merge keys are
        # flattened in (a key overriding a merged one is not a duplicate).
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            try:
                key = self.construct_object(key_node, deep=True)
                if key in out.lines:
                    self.duplicates.append((key, key_node.start_mark.line + 1))
                out.lines[key] = key_node.start_mark.line + 1
            except TypeError:
                pass  # an unhashable key: construct_mapping below reports it
        out.update(self.construct_mapping(node, deep=False))

    def construct_vault(self, node: yaml.Node) -> None:
        raise YamlProblem(
            "vault-encrypted values (!vault) are not supported; decrypt the secret into a "
            "file and point NAME_file at it, or export it and name it with NAME_env",
            node.start_mark.line + 1,
        )


def _child_sizes(node: yaml.Node) -> Iterator[int]:
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield getattr(child, "vf_size", 1)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield getattr(key, "vf_size", 1)
            yield getattr(value, "vf_size", 1)


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LineLoader.construct_line_map)
_LineLoader.add_constructor("!vault", _LineLoader.construct_vault)
_LineLoader.add_constructor("tag:yaml.org,2002:int", _LineLoader.construct_yaml_int)


@contextmanager
def _stack_for_depth() -> Iterator[None]:
    """Enough recursion limit for MAX_DEPTH levels of PyYAML's recursive composer."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, MAX_DEPTH * _FRAMES_PER_LEVEL + 500))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def parse_yaml(text: str) -> tuple[Any, list[tuple[Any, int]]]:
    """(data, duplicate keys with their lines). Raises yaml.YAMLError or YamlProblem."""
    loader = _LineLoader(text)
    try:
        with _stack_for_depth():
            data = loader.get_single_data()
        return data, loader.duplicates
    finally:
        loader.dispose()


def plain(value: Any) -> Any:
    """A copy made of ordinary dicts and lists (see copy_tree)."""
    return copy_tree(value)
