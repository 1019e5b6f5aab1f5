set -x
REPO=$PWD
cd /tmp/w && cat p? > all.tar && echo "125fafc308b118debefc2684e91be5018133b8e6df43787c37f5218028e59bd1  all.tar" | sha256sum -c && tar -xf all.tar && rm all.tar p? || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd $REPO
python3 -c "import vllm; print(vllm.__version__)"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv | tee $OUT/gpu.csv
bash .devicework/s/serve.sh default
bash .devicework/s/serve.sh eager --enforce-eager
