"""What the controller spends before the chain's first piece leaves: cutting the model into
hashed pieces (vfleet/roles/weights/_pieces.py), side by side in one run: before (every chain
deploy re-made MANIFEST.sha256, a sha256 of every file, then hashed the pieces on one thread:
two reads of the model), one thread per shard with the kept MANIFEST.sha256 (make_piece_manifest
now) and the hashes kept from an earlier deploy (piece_cache.py). Prints JSON with the seconds
and the ratios.

    python benchmarks/piece_manifest.py [--shards 4] [--shard-mib 512] [--out F]

The model is `--shards` files of random bytes in a temp dir (written and flushed before the
clock starts, so all three read from the page cache: the figure is hashing, not the disk's
read rate, which a cold cache adds to the first two alike). A 140 GB model in 30 shards on a
controller with more cores gains up to min(shards, cores) from the threads; this machine has
os.cpu_count() of them, printed with the result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vfleet.roles.model_source._manifest import make_manifest, manifest_id, write_manifest  # noqa: E402
from vfleet.roles.weights import _pieces as pieces  # noqa: E402
from vfleet.roles.weights._piece_cache import piece_manifest_for  # noqa: E402


def before(root: Path) -> tuple[str, ...]:
    """The way before this change: the file manifest made again, then every file's pieces
    hashed in turn on one thread."""
    make_manifest(root)
    out: list[str] = []
    for name in pieces.piece_file_names(root):
        out.extend(pieces._hash_pieces(root / name, pieces.DEFAULT_PIECE_SIZE))
    return tuple(out)


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--shard-mib", type=int, default=512)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="vfleet-pieces-bench-") as tmp:
        root = Path(tmp) / "model"
        root.mkdir()
        (root / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}\n')
        block = os.urandom(1 << 20)
        for i in range(args.shards):
            with open(root / f"model-{i + 1:05d}-of-{args.shards:05d}.safetensors", "wb") as f:
                for k in range(args.shard_mib):
                    f.write(hashlib.sha256(block + k.to_bytes(4, "big")).digest() + block[32:])
        write_manifest(root)
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "xdg")
        copy_id = manifest_id(root)
        before(root)  # page cache warm for every case
        serial, serial_s = timed(lambda: before(root))
        (threaded, kept), threaded_s = timed(lambda: piece_manifest_for(root, copy_id))
        (again, kept_again), kept_s = timed(lambda: piece_manifest_for(root, copy_id))
        same = serial == tuple(h for f in threaded.files for h in f.sha256) and again == threaded
        result = {
            "model_mib": args.shards * args.shard_mib,
            "shards": args.shards,
            "cores": os.cpu_count(),
            "pieces": threaded.piece_count,
            "same_hashes": same and not kept and kept_again,
            "before_s": round(serial_s, 3),
            "threaded_s": round(threaded_s, 3),
            "kept_s": round(kept_s, 4),
            "threaded_speedup": round(serial_s / threaded_s, 2),
            "kept_speedup": round(serial_s / kept_s, 1),
        }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if result["same_hashes"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
