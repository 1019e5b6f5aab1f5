# Device call 6 (after five calls that left wheel pieces p0..p4 in /tmp/w; this one carries p5):
# the wheelhouse, `vfleet install`, the Llama-3.1-8B-shaped target (random bf16 on disk), two
# rank-16 LoRA adapters and a Llama-3.2-1B-shaped draft; then the LoRA configuration served.
cp .devicework/p5/* /tmp/w/ && cd /tmp/w && cat p? > all.tar && sha256sum -c all.sha256 && tar -xf all.tar && rm all.tar p? || exit 1
cd - >/dev/null && mkdir -p /opt/vllm/wheelhouse && cp /tmp/w/wheels/*.whl /opt/vllm/wheelhouse/
. docs/evidence/h200-lora-spec/device-scripts/common.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $R/gpu.csv
B=docs/evidence/h200-vllm-0.20.0/device-scripts; CFG=$B/config.json
(export PYTHONPATH=; python3 $B/build_model.py /tmp/models/llama-3.1-8b $CFG
 python3 $S/build_adapter.py /tmp/src/lora-sql $CFG 16 1
 python3 $S/build_adapter.py /tmp/src/lora-chat $CFG 16 2
 python3 $B/build_model.py /tmp/src/draft-1b $S/draft-config.json) 2>&1 | grep -v Warning
ls -la /tmp/models/llama-3.1-8b /tmp/src/* > $R/files.txt; du -sb /tmp/src/* /tmp/models/llama-3.1-8b
inv lora '{model_name: llama-3.1-8b, lora_adapters: [{name: sql-lora, source: /tmp/src/lora-sql}, {name: chat-lora, source: /tmp/src/lora-chat}]}'
vf lora install --report $R/install.json
links() { mkdir -p /tmp/models/lora && ln -sfn /tmp/src/lora-sql /tmp/models/lora/sql-lora && ln -sfn /tmp/src/lora-chat /tmp/models/lora/chat-lora; ls -la /tmp/models/lora; }
serve lora 330
serve_stop; keep_log lora
echo "== call took ${SECONDS}s"
cd $OUT && tar -czf lora.tgz ls && rm -rf ls && ls -la
