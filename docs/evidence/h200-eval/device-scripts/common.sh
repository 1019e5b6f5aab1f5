# Sourced by eval-variants-a.sh and -b.sh: vfleet from the carried tree and the carried wheels
# (/tmp/w, reassembled by call A), an inventory per variant, one-line logs per vfleet command.
REPO=$PWD; E=$REPO/docs/evidence/h200-eval; S=$REPO/docs/evidence/h200-e2e/device-scripts
R=$OUT/eval; K=/tmp/keep; mkdir -p $R $K
[ -d /tmp/vsite ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/vsite /tmp/w/deps/*.whl || exit 1
export PYTHONPATH=/tmp/vsite:$REPO PYTHONUNBUFFERED=1 COLUMNS=160
V="python3 -m vfleet.cli"
left() { echo $(( 560 - SECONDS )); }
# inv NAME 'YAML flow mapping of variables' -> /tmp/inv-NAME.yaml (copied into the results)
inv() {
  python3 -c "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); d['all']['vars'].update(yaml.safe_load(sys.argv[2]) or {}); yaml.safe_dump(d, open(sys.argv[3], 'w'), sort_keys=False)" \
    $E/inventory.yaml "$2" /tmp/inv-$1.yaml && cp /tmp/inv-$1.yaml $R/inventory-$1.yaml
}
vf() {
  local name=$1 step=$2; shift 2
  timeout $(left) $V $step --inventory /tmp/inv-$name.yaml "$@" > $R/$step-$name.txt 2>&1
  echo "== vfleet $step ($name): rc=$?"; tail -4 $R/$step-$name.txt
}
pack() { cp $R/eval-*.json $R/bench-*.json $K/ 2>/dev/null; cd $OUT && tar -czf $1.tgz eval && rm -rf eval && ls -la; }
