"""`--set NAME=VALUE` items from the command line.

A --set item is often a secret (`--set api_key=sk-...`), and error messages end up in
terminals and CI logs, so no message here ever quotes the value: only the name, and only
when the item has a '=' to tell name from value.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from vfleet.engine.errors import VfleetError
from vfleet.engine.inventory.model import SetArgs
from vfleet.engine.inventory.yamlfile import YamlProblem, parse_yaml, plain

__all__ = ["parse_set_args"]

_SET_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHOWN_KEY = 40  # characters of a bad name quoted back


def parse_set_args(items: list[str]) -> SetArgs:
    """`--set k=v` items to a dict of YAML-parsed values (`max_num_seqs=64` gives 64).

    The raw text is kept too (SetArgs.raw): for variables typed string the loader uses it,
    so `vllm_version=0.10` stays '0.10' instead of becoming the number 0.1.
    """
    out = SetArgs()
    out.raw = {}
    for n, item in enumerate(items, start=1):
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep:
            raise VfleetError(f"--set item {n} has no '=': expected NAME=VALUE (e.g. --set max_num_seqs=64)")
        if not _SET_KEY.match(key):
            shown = key if len(key) <= _SHOWN_KEY else key[:_SHOWN_KEY] + "..."
            raise VfleetError(
                f"--set {shown!r}: not a variable name (letters, digits and '_', e.g. api_key); the value is not shown"
            )
        try:
            value: Any = plain(parse_yaml(text)[0]) if text.strip() else None
        except (yaml.YAMLError, YamlProblem):
            raise VfleetError(f"--set {key}: the value is not valid YAML; quote it") from None
        out[key] = value
        out.raw[key] = text
    return out
