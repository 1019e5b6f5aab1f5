# Device session 2 (after six calls that left the vLLM wheel pieces in /tmp/w): the bench
# side by side again, with a tokenizer that knows vfleet's prompt words (words_tokenizer.py)
# and a seed per level; install and serve as in e2e-dense.sh.
cd /tmp/w && cat p? > all.tar && echo "125fafc308b118debefc2684e91be5018133b8e6df43787c37f5218028e59bd1  all.tar" \
  | sha256sum -c && tar -xf all.tar && rm all.tar p? || exit 1
mkdir -p /opt/vllm/wheelhouse && cp /tmp/w/wheels/*.whl /opt/vllm/wheelhouse/
cd - && . docs/evidence/h200-e2e/device-scripts/common.sh
R=$OUT/e2e/bench2; mkdir -p $R
python3 docs/evidence/h200-vllm-0.20.0/device-scripts/build_model.py /tmp/models/llama-3.1-8b \
  docs/evidence/h200-vllm-0.20.0/device-scripts/config.json
python3 $S/words_tokenizer.py /tmp/models/llama-3.1-8b
inv llama '{model_name: llama-3.1-8b}'
vf llama install --report $R/install.json
$V render --inventory /tmp/inv-llama.yaml --dest $R/render-llama > /dev/null
python3 $S/start_unit.py $R/render-llama/h200 $R/vllm-llama.log /tmp/vllm.pid --wait 420
left() { echo $(( 530 - SECONDS )); }
for lv in "1 16" "16 64" "128 384"; do set -- $lv
  [ $(left) -gt 30 ] || { echo "== skipped c=$1: out of time"; continue; }
  timeout $(left) python3 benchmarks/bench_vs_vllm.py --inventory /tmp/inv-llama.yaml --concurrency $1 \
    --prompts $2 --input-len 512 --output-len 128 --warmup 4 --out $R/bench-vs-vllm-c$1.json > $R/bench-vs-vllm-c$1.txt 2>&1
  echo "== bench_vs_vllm c=$1: rc=$?"; python3 -c "import json, sys; print([l['vfleet_over_vllm'] for l in json.load(open(sys.argv[1]))['levels']])" $R/bench-vs-vllm-c$1.json
done
[ $(left) -gt 40 ] && timeout $(left) $V bench --inventory /tmp/inv-llama.yaml --host h200 --concurrency 1,4,16,64,128,256 --input-len 512 \
  --output-len 128 --seed 7 --slo-ttft-p95 2s --out $R/bench-sweep --name h200-llama > $R/bench-sweep.txt 2>&1
echo "== vfleet bench sweep: rc=$?"; tail -12 $R/bench-sweep.txt
grep -o "Prefix cache hit rate: [0-9.]*%" $R/vllm-llama.log | uniq -c
serve_stop
cd $OUT && tar -czf e2e-bench.tgz e2e && rm -rf e2e && ls -la
