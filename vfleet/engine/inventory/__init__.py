"""Load an Ansible inventory (YAML or INI) into validated hosts with merged variables.

Existing Ansible inventories must load unchanged, so the formats, the group_vars/ and
host_vars/ folders and the precedence rules are Ansible's. The package is split the way
Ansible splits its inventory code, one job per module:

    yamlfile   YAML reading: key lines, duplicates, alias and depth caps, !vault
    ini        the INI format, by ansible-core's rules
    files      reading a file and telling YAML from INI
    parse      groups and hosts as written (RawInventory), host ranges and their cap
    graph      cycles, parents, depths, 'ungrouped'
    varsfiles  group_vars/ and host_vars/
    merge      precedence, connection settings
    secrets    NAME_file / NAME_env
    validate   names, types (with Ansible's coercions), unsafe addresses
    masking    secrets hidden for printing
    tree       plain copies of loaded values (with a mask per entry)
    setargs    --set
    model      the public types
    loader     load_inventory, which runs the above in order

The engine knows no variable: callers pass the schema (vfleet.config.variables.SCHEMA for vfleet).
"""

from vfleet.engine.inventory.loader import load_inventory
from vfleet.engine.inventory.masking import masked_vars
from vfleet.engine.inventory.model import Group, Host, Inventory, SetArgs, Source
from vfleet.engine.inventory.parse import MAX_HOSTS
from vfleet.engine.inventory.setargs import parse_set_args

__all__ = [
    "Host",
    "Group",
    "Inventory",
    "load_inventory",
    "parse_set_args",
    "masked_vars",
    "SetArgs",
    "Source",
    "MAX_HOSTS",
]
