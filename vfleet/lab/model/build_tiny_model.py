"""Build a tiny Llama-architecture model locally (no download), for the lab's real vLLM.

Random weights (fixed seed), hidden 256, 4 heads, 2 KV heads, head_dim 64, 2 layers
(head_dim 16 is rejected by vLLM's CPU attention kernel), a byte-level BPE tokenizer trained
here on a fixed built-in text, a ChatML chat template in tokenizer_config.json, and a
generation_config.json. Weights are saved with save_pretrained as safetensors.

Deterministic: the same versions of torch/transformers/tokenizers give byte-identical files
(checked by build twice + compare; see docs/lab-vllm-notes.md).

Needs (controller side, requirements-lab.txt): torch, transformers, tokenizers.

    python vfleet/lab/model/build_tiny_model.py DEST_DIR
    python -c 'from vfleet.lab.model.build_tiny_model import build_tiny_model; build_tiny_model(Path(...))'
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from vfleet.lab.system import swap_into_place

SEED = 1234
HIDDEN = 256
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 64
LAYERS = 2
INTERMEDIATE = 512
VOCAB_SIZE = 1024          # target; BPE stops earlier if the text has no more merges
MAX_POSITIONS = 2048
DTYPE = "bfloat16"

SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>",
                  "<|pad|>"]
BOS, EOS, IM_START, IM_END, PAD = SPECIAL_TOKENS

# ChatML. `add_generation_prompt` opens the assistant turn. Kept on one logical line per
# statement so the template is readable in tokenizer_config.json.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Fixed training text for the tokenizer: built in, so the build needs no file or network
# and is the same everywhere.
CORPUS = """\
vfleet provisions bare-metal GPU hosts to serve large language models with vLLM.
One inventory file describes the fleet; one command takes bare hosts to a load-balanced,
smoke-checked, OpenAI-compatible service, and the same tool audits hosts before an upgrade
and restarts the fleet without dropping requests.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.
Hello! How are you today? I am fine, thank you. What is the capital of France? Paris.
The system prompt says: you are a helpful assistant. The user asks a question and the
assistant answers it in a short sentence. Tokens, tensors, layers, heads and caches.
def main():\n    print("hello, world")\n    return 0\n
{"role": "user", "content": "Say hello."} {"role": "assistant", "content": "Hello."}
0 1 2 3 4 5 6 7 8 9 10 100 1000 2048 4096 8192 3.14 2.71 42
"""


def _train_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = CORPUS.splitlines() * 4
    tok.train_from_iterator(lines, trainer=trainer, length=len(lines))
    return tok


def _tokenizer_config(tok) -> dict:
    added = {}
    for t in SPECIAL_TOKENS:
        added[str(tok.token_to_id(t))] = {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True,
        }
    return {
        "added_tokens_decoder": added,
        "bos_token": BOS,
        "eos_token": IM_END,
        "pad_token": PAD,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MAX_POSITIONS,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": False,
        "chat_template": CHAT_TEMPLATE,
    }


def build_tiny_model(dest: Path, seed: int = SEED) -> Path:
    """Build the tiny model into ``dest`` (replaced if it exists) and return ``dest``."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    dest = Path(dest)
    tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        tok = _train_tokenizer()
        tok.save(str(tmp / "tokenizer.json"))
        ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
        (tmp / "tokenizer_config.json").write_text(
            json.dumps(_tokenizer_config(tok), indent=2, sort_keys=True) + "\n")
        (tmp / "special_tokens_map.json").write_text(json.dumps(
            {"bos_token": BOS, "eos_token": IM_END, "pad_token": PAD},
            indent=2, sort_keys=True) + "\n")

        vocab = tok.get_vocab_size()
        config = LlamaConfig(
            vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
            num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
            max_position_embeddings=MAX_POSITIONS, rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            bos_token_id=ids[BOS], eos_token_id=[ids[IM_END], ids[EOS]],
            pad_token_id=ids[PAD],
        )
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        model = model.to(getattr(torch, DTYPE))
        model.eval()
        model.generation_config = GenerationConfig(
            bos_token_id=ids[BOS], eos_token_id=[ids[IM_END], ids[EOS]],
            pad_token_id=ids[PAD], do_sample=True, temperature=0.7, top_p=0.9,
            max_new_tokens=64,
        )
        model.save_pretrained(str(tmp), safe_serialization=True)
        # save_pretrained of some transformers versions adds the dtype differently; pin it
        cfg_path = tmp / "config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["torch_dtype"] = DTYPE
        cfg["dtype"] = DTYPE
        cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

        swap_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Build the tiny lab Llama model")
    ap.add_argument("dest", type=Path)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--manifest", action="store_true",
                    help="also write MANIFEST.sha256 (vfleet.roles.weights.manifest)")
    args = ap.parse_args(argv)
    out = build_tiny_model(args.dest, seed=args.seed)
    if args.manifest:
        from vfleet.roles.weights.manifest import write_manifest
        write_manifest(out)
    for p in sorted(out.iterdir()):
        print(f"{p.stat().st_size:>10}  {p.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
