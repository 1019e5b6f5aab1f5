"""Checking what the files say against the schema: names, types, and unsafe addresses.

Each written value (an Entry) is checked once, wherever it is inherited, and the value
Ansible would use replaces it (varschema.coerce: "2222" -> 2222 for ansible_port, "no"
-> False for a boolean): the hosts then carry the coerced value. Unknown names are
errors when they are a near-certain typo (difflib 0.8: `max_num_seq`), and warnings when
they are only likely (`tp_size`, `port`, an alias the caller declared): an Ansible
inventory may carry variables of its own, and those must keep loading.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vfleet.engine.inventory.common import Entry, unsafe_name
from vfleet.engine.inventory.merge import ADDRESS, PORT, USER
from vfleet.engine.schema_words import short_value
from vfleet.engine.varschema import MAX_NAME, VariableSpec, VarSchema, text_problem

__all__ = ["Checker"]

# Connection settings the engine reads itself, checked even when the caller's schema does
# not list them (ansible_ssh_port: "2222.0" must not silently become port 22).
_BUILTIN = VarSchema(
    [VariableSpec(n, {"type": "integer", "minimum": 1, "maximum": 65535}) for n in PORT]
    + [VariableSpec(n, {"type": "string", "minLength": 1, "maxLength": MAX_NAME}) for n in ADDRESS + USER]
)


@dataclass
class Checker:
    """Collects errors and warnings (each once) while checking entries."""

    schema: VarSchema
    errors: list[str]
    warnings: list[str]
    _seen: set[str] = field(default_factory=set)

    def _add(self, out: list[str], msg: str) -> None:
        if msg not in self._seen:
            self._seen.add(msg)
            out.append(msg)

    def names(self, layer: dict[str, Entry]) -> None:
        """Unknown names in one layer: an error for a likely typo, a warning for a
        possible one; Ansible's own settings (ansible_*) pass as they are. A name with a
        control character (or one too long) is an error: it would break the one line of
        every message that names it."""
        for k, e in layer.items():
            if k in self.schema.known_names:
                continue
            why = text_problem(k) or (f"is longer than {MAX_NAME} characters" if len(k) > MAX_NAME else None)
            if why:
                why = why if why.startswith("is ") else f"has {why}"
                self._add(
                    self.errors,
                    f"{e.where}: variable name {short_value(k)} {why}; name variables with letters, digits and '_'",
                )
                continue
            if k.startswith("ansible_"):
                continue
            typo = self.schema.suggest(k)
            if typo:
                self._add(self.errors, f"{e.where}: unknown variable '{k}'; did you mean '{typo}'?")
                continue
            hint = self.schema.hint(k)
            if hint:
                self._add(
                    self.warnings, f"{e.where}: unknown variable '{k}' (nothing reads it); did you mean '{hint}'?"
                )

    def value(self, name: str, entry: Entry) -> None:
        """Coerce and check one entry (once); connection settings also for safety (that
        check first: its words say what an address or user name may not hold)."""
        entry.checked = True
        schema = self.schema if name in self.schema.known_names else _BUILTIN
        entry.value = schema.coerce(name, entry.value)
        if name in ADDRESS + USER and isinstance(entry.value, str):
            why = unsafe_name(entry.value)
            if why:
                self._add(
                    self.errors,
                    f"{entry.where}: vars.{name}: {short_value(entry.value)} "
                    f"{why}; give a plain host name, address or user name",
                )
                return
        for problem in schema.check(name, entry.value):
            self._add(self.errors, f"{entry.where}: {problem}")
