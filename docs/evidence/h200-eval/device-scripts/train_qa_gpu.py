"""The lab model's recipe (vfleet/lab/model/build_tiny_model.py: the built-in eval set's
conversations, the same tokenizer and chat template, the same stopping rule and the same check
that greedy decoding answers every reference) at a size worth quantizing, trained on the H200.

    python3 train_qa_gpu.py DEST

Llama shape: hidden 2048, 16 heads of 128 (8 KV heads), 16 layers, MLP 5632: about 0.75 B
parameters, 1.5 GB in bf16, the share fp8 halves. A smaller learning rate than the lab's 2-layer
model (3e-3 diverges at this depth)."""
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")   # deterministic cuBLAS (torch's rule)

from vfleet.lab.model.build_tiny_model import Shape, build_tiny_model  # noqa: E402
from vfleet.lab.model.train import TrainingFailed, TrainSettings  # noqa: E402

SHAPE = Shape(hidden=2048, heads=16, kv_heads=8, head_dim=128, layers=16, intermediate=5632)
# tried in order: a run that misses the margin within its steps leaves DEST untouched
TRIES = (TrainSettings(lr=3e-4, max_steps=400, threads=16), TrainSettings(lr=1e-4, max_steps=800, threads=16))

if __name__ == "__main__":
    for settings in TRIES:
        t0 = time.monotonic()
        try:
            build_tiny_model(Path(sys.argv[1]), settings, SHAPE, device="cuda")
        except TrainingFailed as exc:
            print(f"not trained in {time.monotonic() - t0:.1f} s ({settings}): {exc}")
            continue
        print(f"trained and checked in {time.monotonic() - t0:.1f} s: {SHAPE} {settings}")
        sys.exit(0)
    sys.exit(1)
