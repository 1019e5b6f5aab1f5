# serve NAME [extra flags]: vLLM 0.20.0 with random weights (--load-format dummy), wait for ready
# (WAIT s, default 150), one completion, the memory lines, stop. M, SN (served name), MML from the env.
name=$1; shift
python3 -m vllm.entrypoints.cli.main serve $M --served-model-name $SN --dtype bfloat16 --load-format dummy \
  --tensor-parallel-size 1 --max-model-len $MML --max-num-seqs 256 --gpu-memory-utilization 0.9 \
  --port 8000 "$@" > $OUT/$name.log 2>&1 &
pid=$!
for i in $(seq 1 ${WAIT:-150}); do
  grep -q "Application startup complete" $OUT/$name.log && break
  kill -0 $pid 2>/dev/null || break
  sleep 1
done
echo "== $name ready after ${i}s"
nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits | tee -a $OUT/$name.smi
curl -s -m 20 localhost:8000/v1/completions -H 'content-type: application/json' \
  -d '{"model":"'$SN'","prompt":"w1 w2 w3","max_tokens":8}' | head -c 300; echo
grep -E "KV cache|concurrency|Model loading|took|Chunked|backend|Error|error" $OUT/$name.log | cut -c1-300 | head -20
kill -TERM $pid; wait $pid
