# Sourced by e2e-dense.sh and e2e-moe-mla.sh: vfleet from the carried tree and its carried
# wheels, an inventory per model (inventory.yaml + model variables), serve/stop helpers.
REPO=$PWD; E=$REPO/docs/evidence/h200-e2e; S=$E/device-scripts; R=$OUT/e2e; mkdir -p $R
[ -d /tmp/vsite ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/vsite \
    $REPO/.devicework/e2e/deps/*.whl || exit 1
export PYTHONPATH=/tmp/vsite:$REPO PYTHONUNBUFFERED=1 COLUMNS=120
V="python3 -m vfleet.cli"
# inv NAME 'YAML flow mapping of model variables' -> /tmp/inv-NAME.yaml (copied into the results)
inv() {
  python3 -c "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); d['all']['vars'].update(yaml.safe_load(sys.argv[2])); yaml.safe_dump(d, open(sys.argv[3], 'w'), sort_keys=False)" \
    $E/inventory.yaml "$2" /tmp/inv-$1.yaml && cp /tmp/inv-$1.yaml $R/inventory-$1.yaml
}
# vf NAME STEP ARGS...: one vfleet command, its terminal output in R/STEP-NAME.txt, rc echoed
vf() {
  local name=$1 step=$2; shift 2
  $V $step --inventory /tmp/inv-$name.yaml "$@" > $R/$step-$name.txt 2>&1
  echo "== vfleet $step ($name): rc=$?"; tail -4 $R/$step-$name.txt
}
# model NAME: preflight, render, plan, start the rendered unit by hand, smoke, (caller benches), stop with serve_stop
serve_model() {
  local name=$1
  vf $name preflight --report $R/preflight-$name.json
  $V render --inventory /tmp/inv-$name.yaml --dest $R/render-$name > /dev/null; echo "== render rc=$?"
  vf $name plan
  python3 $S/start_unit.py $R/render-$name/h200 $R/vllm-$name.log /tmp/vllm.pid --wait 420
  nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits > $R/smi-$name.txt
  vf $name smoke --report $R/smoke-$name.json
  grep -E "KV cache|Maximum concurrency|Model loading took|CUDA graph" $R/vllm-$name.log | cut -c1-260 | head -8
}
serve_stop() {
  python3 $S/start_unit.py --stop /tmp/vllm.pid --timeout 90
}
