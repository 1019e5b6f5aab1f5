"""What `vfleet status` asks a host, as facts (a command plus its parser) that travel as ONE
script, run in parallel on the host (vfleet/engine/fact_protocol.py), each bounded by its own
timeout so one hung probe (nvidia-smi on a GPU off the bus, a /metrics that never answers)
costs only its own column.

Every inventory value in a command goes through vfleet/config/quoting.py's shell_quote. Nothing
secret travels: /metrics and /health need no API key in vLLM, and the environment file (it
holds the key) is only hashed on the host, NCCL_ lines left out (see _drift.py)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from vfleet.config.hostconfig import HostConfig, hostport
from vfleet.config.quoting import shell_quote as q
from vfleet.engine.fact_protocol import Output
from vfleet.roles.gateway import DRAINED_STATE
from vfleet.roles.install import MARKER
from vfleet.roles.status import _parsers as p
from vfleet.roles.status._parsers import GPU_MEMORY_FIELDS, GPU_UTIL_FIELDS, MARKER_LIMIT

__all__ = ["Probe", "vllm_probes", "gateway_probes", "local_metrics_url", "METRICS_LIMIT", "SCRIPT_TIMEOUT_S"]

METRICS_LIMIT = 4 * 1024 * 1024  # bytes of /metrics read at most (a vLLM host's is ~50 KB)
HTTP_TIMEOUT_S = 3  # curl's --max-time, for /metrics and each backend's /health
PROBE_TIMEOUT_S = 8  # any probe, whatever it runs (timeout(1) where the host has it)
SCRIPT_TIMEOUT_S = 15  # the status script's run; the connection has its own connect_timeout
_ANY_ADDRESS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}


@dataclass(frozen=True)
class Probe:
    """One command and the parser of its stdout (an OutputFact of the engine's protocol);
    None when the command failed, never printed its section, or said on stderr one of
    `unknown_if` (a tool that exits 0 but could not see what was asked)."""

    cmd: str
    parse: Callable[[str], Any]
    timeout_s: int | None = PROBE_TIMEOUT_S
    ok_codes: tuple[int, ...] = (0,)
    unknown_if: tuple[str, ...] = ()

    def command(self) -> str:
        return self.cmd

    def process_output(self, out: Output | None) -> Any:
        if out is None or out.rc not in self.ok_codes or any(w in out.stderr for w in self.unknown_if):
            return None
        return self.parse(out.stdout)


def local_metrics_url(cfg: HostConfig) -> str:
    """vLLM's /metrics as the host itself reaches it (an any-address bind: loopback)."""
    address = _ANY_ADDRESS.get(cfg.vllm_host, cfg.vllm_host)
    return f"http://{hostport(address, cfg.vllm_port)}/metrics"


def _curl(url: str, options: str = "") -> str:
    return f"curl -sS --max-time {HTTP_TIMEOUT_S} {options} -- {q(url)}".replace("  ", " ")


# A file's sha256 through a filter (NCCL_ lines out of the env file), or missing/unreadable.
HASH_OF = (
    'hash_of() { if [ ! -e "$1" ]; then echo missing; elif [ ! -r "$1" ]; then echo unreadable; '
    "else $2 < \"$1\" | sha256sum | cut -d' ' -f1; fi; }"
)


def vllm_probes(cfg: HostConfig) -> dict[str, Probe]:
    """The probes of a vLLM host: its unit, venv and vLLM version, weights, the server's
    numbers, the GPUs, the last hour's starts and the hashes drift compares."""
    unit = q(cfg.unit)
    marker = q(posixpath.join(cfg.current_link, MARKER))
    return {
        "unit": Probe(
            f"systemctl show -p LoadState,ActiveState,SubState,UnitFileState,NRestarts,"
            f"StateChangeTimestamp -- {unit}; "
            f"t=$(systemctl show -p StateChangeTimestamp --value -- {unit}); "
            'printf \'StateChangeEpoch=%s\\nNow=%s\\n\' "$([ -n "$t" ] && date -d "$t" +%s 2>/dev/null)" '
            '"$(date +%s)"',
            p.unit_state,
        ),
        "install": Probe(
            f"printf 'venv=%s\\n' \"$(readlink -- {q(cfg.current_link)})\"; "
            f"head -c {MARKER_LIMIT} -- {marker} 2>/dev/null; true",
            p.installed,
        ),
        "weights": Probe(f"readlink -- {q(cfg.model_path or '')}; true", p.link_target),
        "metrics": Probe(_curl(local_metrics_url(cfg), f"--max-filesize {METRICS_LIMIT}"), str),
        "gpu_memory": Probe(f"nvidia-smi --query-gpu={','.join(GPU_MEMORY_FIELDS)} --format=csv,noheader,nounits", str),
        "gpu_util": Probe(f"nvidia-smi --query-gpu={','.join(GPU_UTIL_FIELDS)} --format=csv,noheader,nounits", str),
        # journalctl exits 0 with a hint on stderr when the user may not read the system journal
        "journal": Probe(
            f"journalctl -u {unit} --since=-1h --no-pager -q -o cat --output-fields=MESSAGE_ID",
            p.journal_counts,
            unknown_if=("not seeing messages", "No journal files"),
        ),
        "files": Probe(
            f"{HASH_OF}\nprintf 'systemd=%s\\n' \"$(systemctl --version 2>/dev/null | head -n1)\"; "
            f"printf 'unit=%s\\n' \"$(hash_of {q(cfg.unit_path)} cat)\"; "
            f"printf 'env=%s\\n' \"$(hash_of {q(cfg.env_file)} 'grep -v ^NCCL_')\"",
            p.file_hashes,
        ),
    }


def gateway_probes(backends: Sequence[tuple[str, str]]) -> dict[str, Probe]:
    """The probes of a gateway: nginx's state, the drained-hosts file, and each backend's
    /health as the gateway reaches it (`backends`: host name, base URL), all at once."""
    health = "-o /dev/null -w '%{http_code}'"
    checks = " ".join(
        f"( printf '%s %s\\n' {q(name)} \"$({_curl(url + '/health', health)} 2>/dev/null)\" ) &"
        for name, url in backends
    )
    return {
        "nginx": Probe(
            "systemctl is-active -- nginx", lambda out: out.strip() or "unknown", ok_codes=tuple(range(256))
        ),
        "drained": Probe(f"cat -- {q(DRAINED_STATE)} 2>/dev/null; true", p.drained),
        "backends": Probe(f"{checks} wait", p.backend_codes),
    }
