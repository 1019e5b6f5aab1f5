set -x
REPO=$PWD
cd /tmp/w && cat p? > all.tar && echo "125fafc308b118debefc2684e91be5018133b8e6df43787c37f5218028e59bd1  all.tar" | sha256sum -c && tar -xf all.tar && rm all.tar p? || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd $REPO
python3 .devicework/s/build_model.py /tmp/models/qwen2.5-7b .devicework/s/qwen-config.json
python3 -m vllm.entrypoints.cli.main serve --help=all > $OUT/vllm-0.20.0-serve-help.txt 2>&1
timeout 90 python3 -W always::DeprecationWarning -m vllm.entrypoints.openai.api_server --help > $OUT/api_server-0.20.0-help.txt 2>&1
grep -in "deprecat" $OUT/api_server-0.20.0-help.txt | head -5
M=/tmp/models/qwen2.5-7b NAME=qwen2.5-7b bash .devicework/s/serve.sh qwen_default
python3 .devicework/s/build_model.py /tmp/models/llama-3.1-8b .devicework/s/config.json
bash .devicework/s/serve.sh llama_fp8kv --kv-cache-dtype fp8
