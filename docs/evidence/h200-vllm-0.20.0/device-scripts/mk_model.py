"""A model folder vLLM can start with --load-format dummy: config.json and a word-level tokenizer
(one entry per id, so every id decodes), no weight files (vLLM fills random weights itself)."""
import json, os, sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
dest, cfg_path = sys.argv[1], sys.argv[2]
os.makedirs(dest, exist_ok=True)
cfg = json.load(open(cfg_path))
json.dump(cfg, open(f"{dest}/config.json", "w"), indent=1)
vocab = {f"w{i}": i for i in range(cfg["vocab_size"])}
tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
eos = cfg["eos_token_id"][0] if isinstance(cfg["eos_token_id"], list) else cfg["eos_token_id"]
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0", bos_token=f"w{cfg['bos_token_id']}",
                               eos_token=f"w{eos}")
fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
fast.save_pretrained(dest)
print("made", dest, flush=True)
