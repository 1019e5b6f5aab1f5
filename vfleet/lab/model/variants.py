"""Altered copies of a built lab model, for proving the eval gate: a degraded one and a no-op one.

Why: a gate that compares a fleet's answers before and after a change must be shown to stop a
change that hurts the answers and to let through one that does not. `perturb_weights` adds
seeded gaussian noise to every tensor (scaled by that tensor's own std, so each layer is hurt
alike); at STRONG_SCALE the trained lab model loses a third or more of its eval answers, at
TINY_SCALE the weights file changes but greedy decoding answers exactly as before.
`resave_unchanged` writes the same tensors under different safetensors metadata: new bytes and
a new hash, identical numbers (a "no-op upgrade" of the weights).

Copies are written beside `dest` and swapped into place (vfleet/lab/model/staging.py), like the
builder's. A source's MANIFEST.sha256 is not copied (it would name the old bytes); pass
--manifest to write a new one.

    python vfleet/lab/model/variants.py perturb SRC DEST [--scale 0.1] [--seed 0] [--manifest]
    python vfleet/lab/model/variants.py resave SRC DEST [--manifest]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from vfleet.lab.model.staging import staged_folder

WEIGHTS = "model.safetensors"
MANIFEST = "MANIFEST.sha256"
STRONG_SCALE = 1.3  # measured: see docs/lab-vllm-notes.md
TINY_SCALE = 0.01
# At most one metadata key: safetensors writes several in a random order, so the same save would
# give other bytes each time (https://github.com/safetensors/safetensors/issues/584).
PT_METADATA = {"format": "pt"}  # what save_pretrained writes


def _write_copy(src: Path, dest: Path, change: Callable[[dict, dict | None], tuple[dict, dict | None]]) -> Path:
    """Copy the model folder `src` to `dest` with its tensors and weights metadata passed through
    `change`."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    src, dest = Path(src), Path(dest)
    with safe_open(str(src / WEIGHTS), framework="pt") as f:
        tensors, metadata = change({name: f.get_tensor(name) for name in f.keys()}, f.metadata())
    with staged_folder(dest) as tmp:
        for p in src.iterdir():
            if p.is_file() and p.name not in (WEIGHTS, MANIFEST):
                shutil.copy2(p, tmp / p.name)
        save_file(tensors, str(tmp / WEIGHTS), metadata=metadata)
    return dest


def perturb_weights(src: Path, dest: Path, scale: float, seed: int) -> Path:
    """Write `src` with noise N(0, (scale * std of the tensor)^2) added to every tensor, to `dest`.

    Deterministic: the noise comes from one generator seeded with `seed`, drawn for the tensors in
    name order, in float32, and the result is cast back to each tensor's dtype."""
    import torch

    def add_noise(tensors: dict, _metadata) -> tuple[dict, dict]:
        gen = torch.Generator().manual_seed(seed)
        out = {}
        for name in sorted(tensors):
            t = tensors[name].float()
            noise = torch.randn(t.shape, generator=gen) * (scale * float(t.std()))
            out[name] = (t + noise).to(tensors[name].dtype).contiguous()
        return out, PT_METADATA

    return _write_copy(src, dest, add_noise)


def resave_unchanged(src: Path, dest: Path) -> Path:
    """Write `src` to `dest` with identical tensors and other bytes: the safetensors metadata block
    dropped (transformers and vLLM load a file without one), or {"format": "pt"} added."""
    return _write_copy(src, dest, lambda tensors, metadata: (tensors, None if metadata else PT_METADATA))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Write an altered copy of the tiny lab model")
    sub = ap.add_subparsers(dest="what", required=True)
    perturb = sub.add_parser("perturb", help="add seeded noise to every tensor (a degraded model)")
    perturb.add_argument(
        "--scale",
        type=float,
        default=STRONG_SCALE,
        help=f"noise std relative to each tensor's std (tiny: {TINY_SCALE})",
    )
    perturb.add_argument("--seed", type=int, default=0)
    resave = sub.add_parser("resave", help="same tensors, other bytes (a no-op upgrade)")
    for p in (perturb, resave):
        p.add_argument("src", type=Path)
        p.add_argument("dest", type=Path)
        p.add_argument(
            "--manifest", action="store_true", help="also write MANIFEST.sha256 (vfleet.roles.model_source._manifest)"
        )
    args = ap.parse_args(argv)
    if not (args.src / WEIGHTS).is_file():
        print(
            f"{args.src}: no {WEIGHTS} here; build the model first (vfleet/lab/model/build_tiny_model.py)",
            file=sys.stderr,
        )
        return 2
    if args.what == "perturb":
        out = perturb_weights(args.src, args.dest, args.scale, args.seed)
    else:
        out = resave_unchanged(args.src, args.dest)
    if args.manifest:
        from vfleet.roles.model_source import write_manifest

        write_manifest(out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
