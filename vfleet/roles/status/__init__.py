"""`vfleet status`: one screen for the fleet, read in one round trip per host.

One module per job: probes (the commands a host runs, each a fact: command plus parser),
parsers (the pure parsers those facts use, tested from data files), drift (what `deploy
--check` would change, from hashes the host returns), model (a host's and a gateway's status
as typed records, with the verdict), collect (the round trip on every host at once, and the
numbers a --watch round compares with the last), screen (the tables)."""

from __future__ import annotations

from ._collect import Watch, run_round
from ._measured import common_record, host_record, measured_records
from ._screen import screen

__all__ = ["common_record", "host_record", "measured_records", "run_round", "screen", "Watch"]
