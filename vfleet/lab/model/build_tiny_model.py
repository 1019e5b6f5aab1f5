"""Build the lab's tiny Llama-architecture model locally (no download), for the lab's real vLLM.

A model that answers the built-in eval set (vfleet/clients/eval/data/builtin.jsonl) by heart: the
eval gate needs answers that can be right or wrong, and nothing general fits a 2-core lab.
Hidden 256, 4 heads, 2 KV heads, head_dim 64, 2 layers (head_dim 16 is rejected by vLLM's CPU
attention kernel), trained on CPU here (vfleet/lab/model/train.py) on fixed conversations
(vfleet/lab/model/corpus.py); a byte-level BPE tokenizer trained on the same text, a ChatML chat
template in tokenizer_config.json (replies end with <|im_end|>, the eos), a generation_config.json.
Weights are saved with save_pretrained as bf16 safetensors, then loaded back and checked: the
build fails (TrainingFailed, the destination untouched) unless transformers' greedy decoding
gives every eval reference exactly.

Deterministic: the same versions of torch/transformers/tokenizers on the same kind of CPU give
byte-identical files (checked by build twice + compare; see docs/lab-vllm-notes.md).

Needs (controller side, requirements-lab.txt): torch, transformers, tokenizers.

    python vfleet/lab/model/build_tiny_model.py DEST_DIR
    python -c 'from vfleet.lab.model.build_tiny_model import build_tiny_model; build_tiny_model(Path(...))'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from vfleet.lab.model.corpus import Conversation, conversations
from vfleet.lab.model.staging import staged_folder
from vfleet.lab.model.train import TrainingFailed, TrainSettings, deterministic_torch, encode, train, wrong_answers


@dataclass(frozen=True)
class Shape:
    """The architecture. The lab's default is small enough to serve on two shared CPU cores;
    a GPU run (docs/evidence/h200-eval/) trains a larger one on the same conversations, so that
    quantization has weights worth quantizing. head_dim 16 is rejected by vLLM's CPU attention."""

    hidden: int = 256
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    layers: int = 2
    intermediate: int = 512


VOCAB_SIZE = 1024  # target; BPE stops earlier if the text has no more merges
MAX_POSITIONS = 2048
DTYPE = "bfloat16"
# What the lab's model cache is checked against (vfleet/lab/demo.py ensure_model): a cache built
# by another recipe (the random-weights model of earlier versions) is rebuilt, not served.
BUILD_STAMP = "vfleet-build.json"
RECIPE = "trained-on-builtin-eval-1"

SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
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


def _tokenizer_lines(convs: list[Conversation]) -> list[str]:
    """The tokenizer's training text: the built-in text and every training conversation, so the
    questions and replies the model learns take few tokens."""
    chats = [f"{m['role']}\n{m['content']}" for c in convs for m in c.messages]
    chats += [f"assistant\n{c.reply}" for c in convs]
    return CORPUS.splitlines() * 4 + chats


def _train_tokenizer(lines: list[str]):
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
    tok.train_from_iterator(lines, trainer=trainer, length=len(lines))
    return tok


def _tokenizer_config(tok) -> dict:
    added = {}
    for t in SPECIAL_TOKENS:
        added[str(tok.token_to_id(t))] = {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
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


def _model_config(tok, shape: Shape):
    from transformers import LlamaConfig

    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    return LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=ids[BOS],
        eos_token_id=[ids[IM_END], ids[EOS]],
        pad_token_id=ids[PAD],
    )


def build_tiny_model(
    dest: Path, settings: TrainSettings = TrainSettings(), shape: Shape = Shape(), device: str = "cpu"
) -> Path:
    """Build the trained tiny model into ``dest`` (replaced if it exists) and return ``dest``.

    Raises TrainingFailed (and leaves ``dest`` as it was) when the saved model, loaded back as
    vLLM loads it (bf16), does not answer every reference of the built-in eval set under greedy
    decoding."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaForCausalLM

    convs = conversations()
    with staged_folder(dest) as tmp:
        tok = _train_tokenizer(_tokenizer_lines(convs))
        tok.save(str(tmp / "tokenizer.json"))
        ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
        (tmp / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(tok), indent=2, sort_keys=True) + "\n")
        (tmp / "special_tokens_map.json").write_text(
            json.dumps({"bos_token": BOS, "eos_token": IM_END, "pad_token": PAD}, indent=2, sort_keys=True) + "\n"
        )
        tokenizer = AutoTokenizer.from_pretrained(str(tmp))
        rows = [encode(tokenizer, conv, IM_END) for conv in convs]

        with deterministic_torch(settings.threads):
            torch.manual_seed(settings.seed)
            model = LlamaForCausalLM(_model_config(tok, shape)).to(device)
            train(model, rows, ids[PAD], settings)
            model = model.to("cpu", getattr(torch, DTYPE))
            model.generation_config = GenerationConfig(
                bos_token_id=ids[BOS],
                eos_token_id=[ids[IM_END], ids[EOS]],
                pad_token_id=ids[PAD],
                do_sample=True,
                temperature=0.7,
                top_p=0.9,
                max_new_tokens=64,
            )
            model.save_pretrained(str(tmp), safe_serialization=True)
            # save_pretrained of some transformers versions adds the dtype differently; pin it
            cfg_path = tmp / "config.json"
            cfg = json.loads(cfg_path.read_text())
            cfg["torch_dtype"] = DTYPE
            cfg["dtype"] = DTYPE
            cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
            (tmp / BUILD_STAMP).write_text(json.dumps({"recipe": RECIPE}) + "\n")
            wrong = wrong_answers(tmp)
            if wrong:
                raise TrainingFailed(
                    f"lab model: {len(wrong)} eval references not reproduced, "
                    f"e.g. {wrong[0]}: raise max_steps or margin in TrainSettings"
                )
    return Path(dest)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Build the tiny lab Llama model")
    ap.add_argument("dest", type=Path)
    ap.add_argument("--seed", type=int, default=TrainSettings.seed)
    ap.add_argument(
        "--manifest", action="store_true", help="also write MANIFEST.sha256 (vfleet.roles.model_source._manifest)"
    )
    args = ap.parse_args(argv)
    try:
        out = build_tiny_model(args.dest, TrainSettings(seed=args.seed))
    except TrainingFailed as e:
        print(e, file=sys.stderr)
        return 1
    if args.manifest:
        from vfleet.roles.model_source import write_manifest

        write_manifest(out)
    for p in sorted(out.iterdir()):
        print(f"{p.stat().st_size:>10}  {p.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
