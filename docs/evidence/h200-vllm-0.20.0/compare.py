"""Planned KV tokens (roles/capacity/) against vLLM 0.20.0's logged figures on the H200.

Run from the repository root: python docs/evidence/h200-vllm-0.20.0/compare.py"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from vfleet.roles.preflight import capacity as cap  # noqa: E402

HERE = Path(__file__).parent
GPU_MIB = 143771  # nvidia-smi memory.total on the device (gpu.csv)
LLAMA = "docs/evidence/llama-3.1-8b-config.json"
QWEN = "tests/unit/data/facts/fixtures/qwen2.5-7b-instruct.config.json"
RUNS = {  # log file -> (config.json, the flags that differ from the rendered defaults)
    "default": (LLAMA, dict(max_num_batched_tokens=8192, max_num_seqs=256, enforce_eager=False)),
    "eager": (LLAMA, dict(max_num_batched_tokens=8192, max_num_seqs=256, enforce_eager=True)),
    "b16k_s1024": (LLAMA, dict(max_num_batched_tokens=16384, max_num_seqs=1024, enforce_eager=False)),
    "b2k_eager": (LLAMA, dict(max_num_batched_tokens=2048, max_num_seqs=256, enforce_eager=True)),
    # predicted before these two ran (predicted-before-run.txt): not used to fit the reserve
    "qwen_default": (QWEN, dict(max_num_batched_tokens=8192, max_num_seqs=256, enforce_eager=False)),
    "llama_fp8kv": (LLAMA, dict(max_num_batched_tokens=8192, max_num_seqs=256, enforce_eager=False,
                                kv_cache_dtype="fp8")),
}


def main() -> None:
    rows = []
    for name, (config_path, kw) in RUNS.items():
        config = json.loads((ROOT / config_path).read_text())
        log = (HERE / f"{name}.log").read_text()
        logged = cap.parse_kv_cache_log(log)
        avail = float(re.search(r"Available KV cache memory: ([\d.]+) GiB", log).group(1))
        p = cap.plan(config, GPU_MIB, gpu_memory_utilization=0.9, max_model_len=32768, **kw)
        rows.append({"run": name, **kw, "logged_tokens": logged, "logged_available_gib": avail,
                     "planned_tokens": p.kv_capacity_tokens,
                     "planned_kv_gib": round(p.kv_cache_bytes_per_gpu / cap.GIB, 3),
                     "planned_reserve_gib": round(p.reserve_bytes_per_gpu / cap.GIB, 3),
                     "ratio_planned_over_logged": round(p.kv_capacity_tokens / logged, 4)})
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
