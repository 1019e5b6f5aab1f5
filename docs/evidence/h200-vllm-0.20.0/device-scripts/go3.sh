set -x
REPO=$PWD
cd /tmp/w && cat p? > all.tar && echo "125fafc308b118debefc2684e91be5018133b8e6df43787c37f5218028e59bd1  all.tar" | sha256sum -c && tar -xf all.tar && rm all.tar p? || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd $REPO
python3 -c "import transformers, vllm; print('transformers', transformers.__version__, 'vllm', vllm.__version__)"
for m in mixtral dsv2lite gemma2; do python3 .devicework/s2/mk_model.py /tmp/models/$m .devicework/s2/$m.json; done
S=.devicework/s2/serve.sh
M=/tmp/models/mixtral SN=mixtral-8x7b MML=32768 bash $S mixtral_eager --enforce-eager
M=/tmp/models/dsv2lite SN=deepseek-v2-lite MML=32768 bash $S dsv2lite_eager --enforce-eager
M=/tmp/models/mixtral SN=mixtral-8x7b MML=32768 bash $S mixtral_b2k_eager --enforce-eager --max-num-batched-tokens 2048
M=/tmp/models/gemma2 SN=gemma-2-9b MML=8192 bash $S gemma2_eager --enforce-eager
M=/tmp/models/dsv2lite SN=deepseek-v2-lite MML=32768 bash $S dsv2lite_b2k_eager --enforce-eager --max-num-batched-tokens 2048
