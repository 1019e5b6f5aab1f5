# Device call 8 (right after call 7: /opt/vllm holds the installed venv, /tmp/vsite vfleet's
# wheels): an MoE (Mixtral-8x7B) and an MLA model (DeepSeek-V2-Lite) at their real sizes with
# weights vLLM fills itself (--load-format dummy through vllm_extra_args), eager.
. docs/evidence/h200-e2e/device-scripts/common.sh
M=docs/evidence/h200-vllm-0.20.0/device-scripts/mk_model.py
C=tests/unit/data/planner/configs
python3 $M /tmp/models/mixtral-8x7b $C/mixtral-8x7b.json
python3 $M /tmp/models/deepseek-v2-lite $C/deepseek-v2-lite.json
for name in mixtral-8x7b deepseek-v2-lite; do
  inv $name "{model_name: $name, enforce_eager: true, vllm_extra_args: [--load-format, dummy]}"
  serve_model $name
  serve_stop
done
cd $OUT && tar -czf e2e-moe-mla.tgz e2e && rm -rf e2e && ls -la
