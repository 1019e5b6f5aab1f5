"""Build a PEFT-format LoRA adapter for a Llama-shaped model (its config.json): every
attention and MLP projection of every layer, small random bf16 values, written with
safetensors.torch.save_file, and the adapter_config.json peft would write.

    python3 build_adapter.py DEST MODEL_CONFIG_JSON RANK SEED

Tensors: base_model.model.model.layers.{i}.{self_attn|mlp}.{module}.lora_A.weight [r, in]
and .lora_B.weight [out, r] (peft's names and shapes; vLLM reads these).
"""
import json, os, sys, time
import torch
from safetensors.torch import save_file

dest, cfg_path, r, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
t = time.time()
c = json.load(open(cfg_path))
h, i_ = c["hidden_size"], c["intermediate_size"]
hd = c.get("head_dim") or h // c["num_attention_heads"]
q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
mods = {"self_attn": {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h)},
        "mlp": {"gate_proj": (h, i_), "up_proj": (h, i_), "down_proj": (i_, h)}}
dev = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator(device=dev).manual_seed(seed)
tensors = {}
for layer in range(c["num_hidden_layers"]):
    for block, ms in mods.items():
        for m, (fan_in, fan_out) in ms.items():
            p = f"base_model.model.model.layers.{layer}.{block}.{m}"
            tensors[f"{p}.lora_A.weight"] = (torch.randn(r, fan_in, generator=g, device=dev) * 0.01).to(torch.bfloat16).cpu()
            tensors[f"{p}.lora_B.weight"] = (torch.randn(fan_out, r, generator=g, device=dev) * 0.01).to(torch.bfloat16).cpu()
os.makedirs(dest, exist_ok=True)
save_file(tensors, f"{dest}/adapter_model.safetensors", metadata={"format": "pt"})
json.dump({"peft_type": "LORA", "r": r, "lora_alpha": 2 * r,
           "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
           "base_model_name_or_path": "meta-llama/Llama-3.1-8B", "bias": "none", "task_type": "CAUSAL_LM",
           "lora_dropout": 0.0, "fan_in_fan_out": False, "inference_mode": True},
          open(f"{dest}/adapter_config.json", "w"), indent=1)
n = sum(v.numel() for v in tensors.values())
print(f"adapter {dest}: r={r}, {len(tensors)} tensors, {n:,} params, {time.time() - t:.1f}s", flush=True)
