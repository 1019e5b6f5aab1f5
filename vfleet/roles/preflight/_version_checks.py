"""Checks that depend on the pinned vLLM version: driver and GPU support of its wheels, the flags
the inventory renders, the metric names dashboards read and the request fields it stopped reading.
`upgrade_checks` runs them with a NEW version in the config (`--set vllm_version=NEW`) before an
upgrade; host_checks includes them for the version pinned now."""

from __future__ import annotations

from typing import Any

from vfleet.config import vllm_facts
from vfleet.config.extra_args import readings
from vfleet.config.hostconfig import HostConfig
from vfleet.config.managed_flags import LOG_REQUESTS, SWITCHES, VALUED
from vfleet.config.vllm_flags import flag_list

from ._check_base import FAIL, PASS, WARN, Check, is_cpu_build, min_cc_gpu

# --- pinned vLLM vs GPU and driver ------------------------------------------------------------


def check_vllm_gpu(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    version = cfg.vllm_version
    cid = "vllm.gpu_support"
    if not version:
        return Check(cid, WARN, "no vllm_version pinned: GPU support unchecked", "pin `vllm_version` in the inventory")
    rel = vllm_facts.release_info(version)
    if rel is None:
        return Check(
            cid,
            WARN,
            f"vLLM {version} is not in the release table: GPU support unchecked",
            "add the release to vfleet/config/data/vllm_facts.yaml (vllm_releases:)",
        )
    gpu = min_cc_gpu(facts)
    if gpu is None:
        return Check(cid, WARN, "compute capability unknown: GPU support unchecked")
    cc, name = gpu["compute_capability"], gpu.get("name")
    approx = " (approximate: version between table rows)" if rel.approximate else ""
    if vllm_facts.cc_tuple(cc) < vllm_facts.cc_tuple(rel.min_cc):
        last = _last_release_for_cc(cc)
        return Check(
            cid,
            FAIL,
            f"vLLM {version} wheels are built with CUDA {rel.cuda} ({rel.note}): "
            f"{name} (CC {cc}) is not supported{approx}",
            f"pin `vllm_version` to {last} or older on this host, or move to GPUs with CC >= {rel.min_cc}",
        )
    if rel.cc70 == "v0-only" and vllm_facts.cc_tuple(cc) < (8, 0):
        return Check(
            cid,
            WARN,
            f"vLLM {version} runs {name} (CC {cc}) only on the V0 engine{approx}",
            "set VLLM_USE_V1=0 in the service environment, or pin 0.10.2 or newer",
        )
    return Check(cid, PASS, f"vLLM {version} (CUDA {rel.cuda}, torch {rel.torch}) supports {name} (CC {cc}){approx}")


def _last_release_for_cc(cc: str) -> str:
    rows = [
        r for r in vllm_facts.data()["vllm_releases"] if vllm_facts.cc_tuple(cc) >= vllm_facts.cc_tuple(r["min_cc"])
    ]
    return f"{rows[-1]['last'] or rows[-1]['first']}".replace(".999", ".x") if rows else "none"


def _newest_release_for_driver(driver: str, native: bool) -> str | None:
    """Newest release table row the driver runs natively, or at all (minor-version compatibility)."""
    rels = [(r, vllm_facts.release_info(r["first"])) for r in vllm_facts.data()["vllm_releases"]]
    rows = [
        r
        for r, rel in rels
        if vllm_facts.version_ge(driver, rel.min_driver if native else (rel.compat_driver or rel.min_driver))
    ]
    return (rows[-1]["last"] or rows[-1]["first"]).replace(".999", ".x") if rows else None


def check_vllm_driver(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    version = cfg.vllm_version
    cid = "vllm.driver"
    if not version:
        return Check(
            cid, WARN, "no vllm_version pinned: driver requirement unchecked", "pin `vllm_version` in the inventory"
        )
    rel = vllm_facts.release_info(version)
    driver = facts.get("driver_version")
    if rel is None:
        return Check(
            cid,
            WARN,
            f"vLLM {version} is not in the release table: driver requirement unchecked",
            "add the release to vfleet/config/data/vllm_facts.yaml (vllm_releases:)",
        )
    if not driver:
        return Check(cid, WARN, "driver version unknown: requirement unchecked")
    builds = f"CUDA {rel.cuda} kernels" + (
        f", torch {rel.torch} on CUDA {rel.torch_cuda}" if rel.torch_cuda and rel.torch_cuda != rel.cuda else ""
    )
    have = f"{driver} (CUDA {facts.get('cuda_version') or vllm_facts.max_cuda_for_driver(driver) or 'unknown'})"
    if vllm_facts.version_ge(driver, rel.min_driver):
        return Check(
            cid, PASS, f"driver {driver} meets vLLM {version}'s CUDA {rel.runtime_cuda} ({builds}: >= {rel.min_driver})"
        )
    if rel.compat_driver and vllm_facts.version_ge(driver, rel.compat_driver):
        return Check(
            cid,
            WARN,
            f"vLLM {version} ({builds}) needs driver >= {rel.min_driver} natively; this "
            f"host has {have}, so it runs only through CUDA minor-version compatibility "
            f"(CUDA {rel.runtime_cuda.split('.')[0]}.x on >= {rel.compat_driver}): prebuilt kernels "
            "work, anything that needs PTX JIT or a newer driver API fails at run time",
            f"upgrade the NVIDIA driver to >= {rel.min_driver}",
        )
    older, native = _newest_release_for_driver(driver, False), _newest_release_for_driver(driver, True)
    alt = f", or pin `vllm_version` to {older} or older" if older else ""
    alt += f" ({native} or older natively)" if native and native != older else ""
    fwd = vllm_facts.forward_compat()
    cross = (
        (
            f"; CUDA {rel.runtime_cuda.split('.')[0]} does not run on this driver's major even through "
            f"minor-version compatibility: only CUDA forward compatibility ({fwd['gpus']} GPUs, the "
            f"cuda-compat package) would, which vLLM enables with {fwd['env']}=1"
        )
        if rel.compat_driver
        else ""
    )
    return Check(
        cid,
        FAIL,
        f"vLLM {version} ({builds}) needs driver >= {rel.min_driver} "
        f"(>= {rel.compat_driver or rel.min_driver} with minor-version compatibility); this host has "
        f"{have}{cross}",
        f"upgrade the NVIDIA driver to >= {rel.min_driver}{alt}",
    )


# --- vLLM version: flags and metrics (also the pre-upgrade audit) -----------------------------


def inventory_flags(cfg: HostConfig) -> dict[str, str]:
    """{flag: where it came from} for flags the inventory asks for: `vllm_extra_args` (each
    option word as vLLM reads it: `-tp`, `--max_num_seqs=8` and `--swap-space 4` name their flag)
    and the variables the unit renders to flags (vfleet/config/managed_flags.py, the table
    argv.py renders from), where the inventory set them."""
    out: dict[str, str] = {}
    for _word, r in readings(cfg.vllm_extra_args, flag_list(cfg.vllm_version)):
        if r is not None:
            flag = r.canonical[0] if len(r.canonical) == 1 else vllm_facts.normalize_flag(r.spelled)
            out[flag] = f"vllm_extra_args.{r.spelled}"  # never a value
    for rendered in (*VALUED, *SWITCHES, LOG_REQUESTS):
        if rendered.variable not in cfg.set_in_inventory:
            continue  # a schema default asks for no flag (shutdown_timeout's 30 s before vLLM 0.18)
        if rendered.value(cfg) not in (None, False, "") and rendered.flag not in out:
            out[rendered.flag] = rendered.variable
    return out


def check_flags(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    version = cfg.vllm_version
    if not version:
        return Check("vllm.flags", PASS, "no vllm_version pinned: flags not checked")
    fails, warns, fixes = [], [], []
    for flag, origin in sorted(inventory_flags(cfg).items()):
        st = vllm_facts.flag_status(flag, version)
        row = vllm_facts.flag_row(flag) or {}
        verbatim = origin.startswith("vllm_extra_args")
        if st == "removed":
            repl = f"; use {row['replaced_by']}" if row.get("replaced_by") else ""
            msg = f"{flag} ({origin}) was removed in vLLM {row['removed']}"
            (fails if verbatim else warns).append(msg + ("" if verbatim else ": the unit will omit it"))
            fixes.append(f"remove `{origin}` from the inventory{repl}")
        elif st == "not-yet":
            msg = f"{flag} ({origin}) needs vLLM >= {row['added']}"
            (fails if verbatim else warns).append(msg + ("" if verbatim else ": the unit will omit it"))
            fixes.append(f"remove `{origin}` or pin vllm_version >= {row['added']}")
        elif st == "deprecated":
            warns.append(f"{flag} ({origin}) is deprecated since {row['deprecated']} (removed in {row['removed']})")
            fixes.append(f"replace `{origin}`" + (f" with {row['replaced_by']}" if row.get("replaced_by") else ""))
    if fails or warns:
        return Check(
            "vllm.flags", FAIL if fails else WARN, f"vLLM {version}: " + "; ".join(fails + warns), "; ".join(fixes)
        )
    return Check("vllm.flags", PASS, f"every inventory flag is accepted by vLLM {version}")


def _engine_on_host(version: str | None, facts: dict[str, Any]) -> str | None:
    """Engine the version runs on this host: V0 where the release runs CC < 8.0 only on V0."""
    rel, gpu = vllm_facts.release_info(version), min_cc_gpu(facts)
    if rel and gpu and rel.cc70 == "v0-only" and vllm_facts.cc_tuple(gpu["compute_capability"]) < (8, 0):
        return "V0"
    return vllm_facts.engine_for(version)


def check_metrics(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    """Metric names that change between the installed and the pinned version (per engine: a V100
    on 0.9.x still runs V0 and exports V0 names)."""
    installed = (facts.get("vllm_installed") or {}).get("version")
    new = cfg.vllm_version
    if not new:
        return Check("vllm.metrics", PASS, "no vllm_version pinned: metric names not compared")
    e_new = _engine_on_host(new, facts)
    if not installed:
        return Check(
            "vllm.metrics",
            PASS,
            f"no vLLM installed yet; vLLM {new} ({e_new}) exports "
            + ", ".join(sorted(vllm_facts.metrics_exported(new, e_new))),
        )
    e_old = _engine_on_host(installed, facts)
    renames = vllm_facts.metric_renames(installed, new, e_old, e_new)
    if renames:
        pairs = ", ".join(f"{a} -> {b}" for a, b in renames)
        return Check(
            "vllm.metrics",
            WARN,
            f"metric names change from installed {installed} ({e_old}) to {new} ({e_new}): {pairs}",
            "make dashboards, alerts and drain gates accept both names before upgrading",
        )
    return Check("vllm.metrics", PASS, f"metric names unchanged between installed {installed} and {new}")


def check_request_fields(cfg: HostConfig, facts: dict[str, Any]) -> Check:
    """Request fields the installed vLLM reads and the pinned one ignores (vllm_facts
    request_fields): vLLM answers 200 to a request that still sends one, so nothing but this
    audit tells the clients' owners before the upgrade."""
    installed = (facts.get("vllm_installed") or {}).get("version")
    new = cfg.vllm_version
    if not new:
        return Check("vllm.request_fields", PASS, "no vllm_version pinned: request fields not compared")
    dropped = vllm_facts.dropped_request_fields(installed, new)
    if not dropped:
        return Check("vllm.request_fields", PASS, f"no request field dropped between installed {installed} and {new}")
    names = ", ".join(f"{r['field']} (removed in {r['removed']}; send {r['replaced_by']})" for r in dropped)
    if not installed:
        return Check(
            "vllm.request_fields",
            PASS,
            f"no vLLM installed yet; vLLM {new} ignores these request fields (HTTP 200, no effect): {names}",
        )
    return Check(
        "vllm.request_fields",
        WARN,
        f"vLLM {new} ignores request fields that installed {installed} reads: "
        f"{names}; a client that still sends one gets HTTP 200 and, for guided_*, unconstrained output",
        "move every client to the replacements before upgrading (ask their owners: the server "
        "cannot tell an ignored field from a missing one)",
    )


def upgrade_checks(cfg: HostConfig, facts: dict[str, Any]) -> list[Check]:
    """What the config's vllm_version breaks on this host: driver, GPU support, flags, metric
    names, request fields it no longer reads. Run it with the NEW version in the config before
    an upgrade (host_checks includes it too)."""
    out: list[Check] = []
    if not is_cpu_build(cfg) and facts.get("gpu_state") == "ok":
        out += [check_vllm_driver(cfg, facts), check_vllm_gpu(cfg, facts)]
    out += [check_flags(cfg, facts), check_metrics(cfg, facts), check_request_fields(cfg, facts)]
    return out
