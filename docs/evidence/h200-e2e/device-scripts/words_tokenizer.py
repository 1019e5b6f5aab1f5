"""Replace a device model's word-level tokenizer by one whose vocabulary starts with vfleet
bench's synthetic-prompt words (roles/bench/prompts.WORDS), then w<id> up to vocab_size.

Why: the first run's tokenizer knew only w<id> words, so every English word of vfleet's
prompts became the unknown token: all its prompts were the same token sequence and vLLM's
prefix cache answered them (hit rate 97%), while `vllm bench serve` decodes random ids into
w<id> words that map back one to one. With this vocabulary both tools' prompts are distinct.

    python3 words_tokenizer.py MODEL_DIR
"""
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from vfleet.clients.bench.prompts import WORDS

dest = sys.argv[1]
cfg = json.load(open(f"{dest}/config.json"))
n = cfg["vocab_size"]
words = list(dict.fromkeys(w for w in WORDS))
vocab = {w: i for i, w in enumerate(words)}
vocab.update({f"w{i}": i for i in range(len(words), n)})
tok = Tokenizer(models.WordLevel(vocab, unk_token=f"w{len(words)}"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
eos = cfg["eos_token_id"][0] if isinstance(cfg["eos_token_id"], list) else cfg["eos_token_id"]
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=f"w{len(words)}",
                               bos_token=f"w{cfg['bos_token_id']}", eos_token=f"w{eos}")
fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
fast.save_pretrained(dest)
print(f"tokenizer: {len(words)} words + w<id> up to {n}", flush=True)
