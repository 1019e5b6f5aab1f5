"""The one Jinja2 environment every renderer uses: templates/ of the package, strict
undefined (a missing value is an error, not an empty string), no autoescape (these are
config files, not HTML: each value is quoted for its target by vfleet/config/quoting.py filters)."""

from __future__ import annotations

import functools

import jinja2

from vfleet.config.quoting import FILTERS
from vfleet.templates import TEMPLATE_DIR


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env
