# One variant on the device's H200, from vfleet's own rendered unit: render, start, smoke, eval,
# bench, read what vLLM logged, stop. Sourced by eval-variants-*.sh after common setup.
#   variant NAME 'YAML flow mapping of extra variables' [--reference EVAL.json]
variant() {
  local name=$1 vars=$2; shift 2
  inv $name "$vars"
  $V render --inventory /tmp/inv-$name.yaml --dest $R/render-$name > /dev/null; echo "== render $name rc=$?"
  vf $name plan
  python3 $S/start_unit.py $R/render-$name/h200 $R/vllm-$name.log /tmp/vllm.pid --wait 420 || { tail -30 $R/vllm-$name.log; return 1; }
  nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits > $R/smi-$name.txt
  vf $name smoke --report $R/smoke-$name.json
  $V eval --inventory /tmp/inv-$name.yaml --host h200 --out $R --name eval-$name "$@" > $R/eval-$name.txt 2>&1
  echo "== eval $name rc=$?"; tail -3 $R/eval-$name.txt
  $V bench --inventory /tmp/inv-$name.yaml --host h200 --concurrency 1,16,64 --input-len 512 --output-len 128 \
    --seed 7 --out $R --name bench-$name > $R/bench-$name.txt 2>&1
  echo "== bench $name rc=$?"; tail -6 $R/bench-$name.txt
  grep -E "Model loading took|Available KV cache memory|GPU KV cache size" $R/vllm-$name.log | cut -c1-220 | head -4
  python3 $S/start_unit.py --stop /tmp/vllm.pid --timeout 90
}
