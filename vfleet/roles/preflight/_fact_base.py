"""The base of the preflight fact table: PreflightFact (a shell `command` plus a parser of its
output, in the engine's fact protocol) and what probes share: the guard for a missing nvidia-smi
and the time bound on probes that can hang. Its own module so that the fact classes, spread over
_fact_table.py and _model_fact_table.py, import it without cycles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from vfleet.engine.fact_protocol import Output

NVSMI_GUARD = 'command -v nvidia-smi >/dev/null 2>&1 || { echo "nvidia-smi: command not found" >&2; exit 127; }'
# A wedged driver can make nvidia-smi (and anything that loads CUDA or walks PCIe) hang for
# minutes; one hung probe must not hold the whole preflight. Healthy hosts answer far below this.
COMMAND_TIMEOUT_S = 20


@dataclass(frozen=True)
class PreflightFact:
    """A command and a parser of its stdout. `name` labels its section of the gathered output,
    `key` names its value in the facts dict, `snapshot_file` the file in a host snapshot folder
    when the raw output belongs to the GPU profile."""

    name: ClassVar[str] = ""
    key: ClassVar[str] = ""
    snapshot_file: ClassVar[str | None] = None
    timeout_s: ClassVar[int | None] = None

    def command(self) -> str:
        raise NotImplementedError

    def parse(self, output: str) -> Any:
        raise NotImplementedError

    def process_output(self, out: Output | None) -> Any:
        """Default: a failed or missing command means the fact is unknown (None)."""
        if out is None or out.rc != 0:
            return None
        return self.parse(out.stdout)
