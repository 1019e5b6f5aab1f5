"""Invoke entry point: `invoke --list` in the repo shows the same menu as the `vfleet` command."""

from vfleet.cli import namespace  # noqa: F401  (Invoke looks for `namespace` here)
