# Sourced by spec.sh when enough of its call is left (else a call of its own, after common.sh):
# a LoRA configuration whose stacks are large enough to see in the KV figure (rank-16 stacks
# for two adapters are ~0.2% of it): four adapters of rank 256 (one built, three hard-linked
# copies under other names; vLLM's stacks depend on --max-loras and --max-lora-rank only).
(export PYTHONPATH=; python3 $S/build_adapter.py /tmp/src/lora-r256-a docs/evidence/h200-vllm-0.20.0/device-scripts/config.json 256 3) 2>&1 | grep -v Warning
for x in b c d; do cp -al /tmp/src/lora-r256-a /tmp/src/lora-r256-$x; done
links() { mkdir -p /tmp/models/lora && for x in a b c d; do ln -sfn /tmp/src/lora-r256-$x /tmp/models/lora/r256-$x; done; ls -la /tmp/models/lora; }
inv lora-r256 '{model_name: llama-3.1-8b, lora_adapters: [{name: r256-a, source: /tmp/src/lora-r256-a}, {name: r256-b, source: /tmp/src/lora-r256-b}, {name: r256-c, source: /tmp/src/lora-r256-c}, {name: r256-d, source: /tmp/src/lora-r256-d}]}'
serve lora-r256 $(( 560 - SECONDS ))
serve_stop; keep_log lora-r256
