"""Shared ground of the inventory loading tests (test_inventory, test_inventory_errors): the
folder of real inventory files they run from (so messages carry the short paths an operator would
see), and the error lines a load of one of them fails with."""

from __future__ import annotations

from pathlib import Path

import pytest

from vfleet.config.variables import SCHEMA
from vfleet.engine.errors import InventoryError
from vfleet.engine.inventory import load_inventory

DATA = Path(__file__).parent / "data" / "inventories"


def errors_of(path: str, overrides=None) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        load_inventory(path, overrides, schema=SCHEMA)
    return exc.value.errors
