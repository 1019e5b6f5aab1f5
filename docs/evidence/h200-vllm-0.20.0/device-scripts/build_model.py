"""Build a Llama-3.1-8B-shaped model with random bf16 weights and a word-level tokenizer."""
import json, sys, time, torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast
dest, cfg_path = sys.argv[1], sys.argv[2]
t = time.time()
cfg = json.load(open(cfg_path)); mt = cfg.pop("model_type")
for k in ("architectures", "torch_dtype"): cfg.pop(k, None)
config = AutoConfig.for_model(mt, **cfg)
config.architectures = ["LlamaForCausalLM"]
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
model.save_pretrained(dest, safe_serialization=True)
del model; torch.cuda.empty_cache()
vocab = {f"w{i}": i for i in range(cfg["vocab_size"])}
tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0", bos_token="w128000", eos_token="w128009")
fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
fast.save_pretrained(dest)
c = json.load(open(f"{dest}/config.json")); c["torch_dtype"] = "bfloat16"; json.dump(c, open(f"{dest}/config.json", "w"), indent=1)
print("built", dest, f"{time.time()-t:.1f}s", flush=True)
