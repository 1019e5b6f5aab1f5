# Sourced by lora.sh and spec.sh (after call 6 reassembled the wheels in /tmp/w): vfleet from a
# snapshot of the committed package (.devicework/snap, `git archive HEAD vfleet`, commit in
# snap/COMMIT: the checkout is edited meanwhile) and its carried wheels; the h200-e2e inventory
# plus per-configuration variables; serve/stop with h200-e2e's start_unit.py.
REPO=$PWD; E=$REPO/docs/evidence/h200-lora-spec; S=$E/device-scripts; S0=$REPO/docs/evidence/h200-e2e/device-scripts
R=$OUT/ls; mkdir -p $R
[ -d /tmp/vsite ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/vsite /tmp/w/deps/*.whl || exit 1
export PYTHONPATH=/tmp/vsite:$REPO/.devicework/snap PYTHONUNBUFFERED=1 COLUMNS=120
V="python3 -m vfleet.cli"
# inv NAME 'YAML flow mapping' -> /tmp/inv-NAME.yaml (copied into the results)
inv() {
  python3 -c "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); d['all']['vars'].update(yaml.safe_load(sys.argv[2])); yaml.safe_dump(d, open(sys.argv[3], 'w'), sort_keys=False)" \
    $REPO/docs/evidence/h200-e2e/inventory.yaml "$2" /tmp/inv-$1.yaml && cp /tmp/inv-$1.yaml $R/inventory-$1.yaml
}
vf() {
  local name=$1 step=$2; shift 2
  $V $step --inventory /tmp/inv-$name.yaml "$@" > $R/$step-$name.txt 2>&1
  echo "== vfleet $step ($name): rc=$?"; tail -4 $R/$step-$name.txt | cut -c1-200
}
# serve NAME WAIT: preflight, render, plan, the files where the unit reads them (links: no rsync
# here, the weights step is not run), start the rendered unit by hand, smoke
serve() {
  local name=$1 wait=$2
  vf $name preflight --report $R/preflight-$name.json
  grep -E "model\.(lora|speculative)|capacity\.kv|model\.chat" $R/preflight-$name.txt | cut -c1-160
  $V render --inventory /tmp/inv-$name.yaml --dest $R/render-$name > /dev/null; echo "== render rc=$?"
  grep -E "lora|speculative" $R/render-$name/h200/etc/systemd/system/vllm.service
  vf $name plan
  grep -E "kv_capacity_tokens|lora_bytes|draft_" $R/plan-$name.txt | head -4
  links
  python3 $S0/start_unit.py $R/render-$name/h200 /tmp/vllm-$name.log /tmp/vllm.pid --wait $wait; local up=$?
  nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits > $R/smi-$name.txt
  [ $up = 0 ] && vf $name smoke --report $R/smoke-$name.json
  grep -E "KV cache|Maximum concurrency|Model loading took|CUDA graph|LoRA|lora|[Ss]pec|Error|error|Traceback" /tmp/vllm-$name.log \
    | grep -v "Capturing CUDA graphs" | cut -c1-300 | head -30
  return $up
}
serve_stop() {
  python3 $S0/start_unit.py --stop /tmp/vllm.pid --timeout 60
}
# the vLLM log, trimmed: progress bars cut, lines to 1000 characters, at most 180 KB
keep_log() {
  sed -E 's/\r/\n/g' /tmp/vllm-$1.log | grep -v -E "Capturing CUDA graphs.*it/s\]?$|^\s*$" | cut -c1-1000 | head -c 180000 > $R/vllm-$1.log
}
