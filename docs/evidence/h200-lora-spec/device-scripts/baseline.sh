# Device call 13 (a second machine: five calls left wheel pieces p0..p4 in /tmp/w; this one
# carries p5): the plain Llama-3.1-8B configuration with the same vfleet snapshot, to tell which
# smoke failures of the LoRA and speculative runs belong to the synthetic model itself (the
# probes "stops" and "json_schema", added to smoke after docs/evidence/h200-e2e), with
# VLLM_LOGGING_LEVEL=DEBUG so that vLLM logs the exception behind the json_schema HTTP 500.
cp .devicework/p5/* /tmp/w/ && cd /tmp/w && cat p? > all.tar && sha256sum -c all.sha256 && tar -xf all.tar && rm all.tar p? || exit 1
cd - >/dev/null && mkdir -p /opt/vllm/wheelhouse && cp /tmp/w/wheels/*.whl /opt/vllm/wheelhouse/
. docs/evidence/h200-lora-spec/device-scripts/common.sh
B=docs/evidence/h200-vllm-0.20.0/device-scripts
(export PYTHONPATH=; python3 $B/build_model.py /tmp/models/llama-3.1-8b $B/config.json) 2>&1 | grep -v -E "Warning|Writing"
inv plain '{model_name: llama-3.1-8b}'
vf plain install --report $R/install-2.json
links() { :; }
export VLLM_LOGGING_LEVEL=DEBUG
serve plain 300
grep -E "create_error_response called with|xgrammar|structured|Traceback" /tmp/vllm-plain.log | cut -c1-600 | head -20
curl -s -m 30 http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"llama-3.1-8b","messages":[{"role":"user","content":"x"}],"max_tokens":8,"response_format":{"type":"json_object"}}' | cut -c1-400; echo
serve_stop
grep -E "create_error_response called with" /tmp/vllm-plain.log | cut -c1-600 > $R/vllm-plain-errors.txt
sed -E 's/\r/\n/g' /tmp/vllm-plain.log | grep -v -E "Capturing CUDA graphs.*it/s\]?$|^\s*$| DEBUG " | cut -c1-1000 | head -c 180000 > $R/vllm-plain.log
grep -c " DEBUG " /tmp/vllm-plain.log
echo "== call took ${SECONDS}s"
cd $OUT && tar -czf plain.tgz ls && rm -rf ls && ls -la
