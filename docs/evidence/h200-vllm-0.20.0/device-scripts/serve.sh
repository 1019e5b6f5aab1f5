# serve NAME [extra flags]: start vLLM 0.20.0 as vfleet renders it, wait for ready, one completion, stop.
name=$1; shift
M=${M:-/tmp/models/llama-3.1-8b}; NAME=${NAME:-llama-3.1-8b}
python3 -m vllm.entrypoints.cli.main serve $M --served-model-name $NAME --dtype bfloat16 \
  --tensor-parallel-size 1 --max-model-len 32768 --max-num-seqs 256 --gpu-memory-utilization 0.9 \
  --port 8000 "$@" > $OUT/$name.log 2>&1 &
pid=$!
for i in $(seq 1 300); do
  grep -q "Application startup complete" $OUT/$name.log && break
  kill -0 $pid 2>/dev/null || break
  sleep 1
done
echo "== $name ready after ${i}s"
nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits | tee -a $OUT/$name.smi
curl -s localhost:8000/v1/completions -H 'content-type: application/json' \
  -d '{"model":"'$NAME'","prompt":"w1 w2 w3","max_tokens":8}' | head -c 300; echo
grep -E "KV cache|concurrency|memory|Memory|took|graph|max_num_batched_tokens|Chunked|profil" $OUT/$name.log | cut -c1-400
kill -TERM $pid; wait $pid
