# Device call 7 (after six calls that left the vLLM wheel pieces in /tmp/w): the wheelhouse,
# `vfleet install` into /opt/vllm/vllm-0.20.0, then a dense GQA model (Llama-3.1-8B's config,
# random bf16 weights on disk) through preflight, render, plan, start, smoke and bench.
set -x
cd /tmp/w && cat p? > all.tar && echo "125fafc308b118debefc2684e91be5018133b8e6df43787c37f5218028e59bd1  all.tar" \
  | sha256sum -c && tar -xf all.tar && rm all.tar p? || exit 1
mkdir -p /opt/vllm/wheelhouse && cp /tmp/w/wheels/*.whl /opt/vllm/wheelhouse/
cd - && . docs/evidence/h200-e2e/device-scripts/common.sh
set +x
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $R/gpu.csv
python3 docs/evidence/h200-vllm-0.20.0/device-scripts/build_model.py /tmp/models/llama-3.1-8b \
  docs/evidence/h200-vllm-0.20.0/device-scripts/config.json
inv llama '{model_name: llama-3.1-8b}'
vf llama install --report $R/install.json
ls -la /opt/vllm/ /opt/vllm/current/ | head; cat /opt/vllm/vllm-0.20.0/.vfleet-install.json; echo
serve_model llama
# vllm bench serve and vfleet bench side by side, each level with its own request count
# (each bounded by what is left of the call's 600 s, so the results are always packed)
left() { echo $(( 530 - SECONDS )); }
for lv in "1 16" "16 64" "128 384"; do set -- $lv
  [ $(left) -gt 30 ] || { echo "== skipped c=$1: out of time"; continue; }
  timeout $(left) python3 benchmarks/bench_vs_vllm.py --inventory /tmp/inv-llama.yaml --concurrency $1 \
    --prompts $2 --input-len 512 --output-len 128 --warmup 4 --out $R/bench-vs-vllm-c$1.json > $R/bench-vs-vllm-c$1.txt 2>&1
  echo "== bench_vs_vllm c=$1: rc=$?"; tail -3 $R/bench-vs-vllm-c$1.txt | cut -c1-600
done
[ $(left) -gt 40 ] && timeout $(left) $V bench --inventory /tmp/inv-llama.yaml --host h200 --concurrency 1,4,16,64,128,256 --input-len 512 \
  --output-len 128 --slo-ttft-p95 2s --out $R/bench-sweep --name h200-llama > $R/bench-sweep.txt 2>&1
echo "== vfleet bench sweep: rc=$?"; tail -15 $R/bench-sweep.txt
serve_stop
cd $OUT && tar -czf e2e-dense.tgz e2e && rm -rf e2e && ls -la
