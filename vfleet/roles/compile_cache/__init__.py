"""The torch.compile cache built once per key and copied to identical hosts (docs/compile-cache.md)."""

from __future__ import annotations

from ._share import sharing

__all__ = ["sharing"]
