#!/bin/bash
# Control: the same PP=2 on ONE node (mp executor, no --nnodes), CPU build.
V=/tmp/rlab/venv/bin/python
export VLLM_CPU_OMP_THREADS_BIND="0|1" VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
$V -m vllm.entrypoints.openai.api_server --model /var/cache/vfleet/models/tiny --served-model-name tiny --tensor-parallel-size 1 --pipeline-parallel-size 2 --max-model-len 512 --max-num-seqs 8 --enforce-eager --distributed-executor-backend mp --host 127.0.0.1 --port 18124 > single.log 2>&1 &
echo $! > single.pid
for i in $(seq 1 60); do curl -s -m 3 http://127.0.0.1:18124/v1/models | grep -q tiny && break; sleep 5; done
echo "polls=$i" > result1
curl -s -m 60 http://127.0.0.1:18124/v1/completions -H 'Content-Type: application/json' -d '{"model":"tiny","prompt":"Hello","max_tokens":8}' >> result1
echo >> result1
kill $(cat single.pid); sleep 6; kill -9 $(cat single.pid) 2>/dev/null
