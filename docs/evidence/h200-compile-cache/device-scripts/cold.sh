# Device call 6: the wheels reassembled, vfleet's deps, the model, `vfleet install` and `vfleet
# render`; then (a) a cold start on empty caches, packed by vfleet's compile-cache commands.
[ -d /tmp/w/wheels ] || { cd /tmp/w && cat p? > all.tar && echo "d9164b1e5693b8cd2319b49bb561b5a17f1bef6d5aafd19df609fb6f1fea364b  all.tar" \
  | sha256sum -c && tar -xf all.tar && rm all.tar p? && cd - >/dev/null || exit 1; }
mkdir -p /opt/vllm/wheelhouse && cp /tmp/w/wheels/*.whl /opt/vllm/wheelhouse/
. docs/evidence/h200-compile-cache/device-scripts/common.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $R/gpu.csv
# the model builder runs on the machine's own packages: vfleet's huggingface_hub is too new for its transformers
[ -f /tmp/models/llama-3.1-8b/config.json ] || PYTHONPATH= python3 $REPO/docs/evidence/h200-vllm-0.20.0/device-scripts/build_model.py \
  /tmp/models/llama-3.1-8b $REPO/docs/evidence/h200-vllm-0.20.0/device-scripts/config.json
python3 -c "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); d['all']['vars']['model_name'] = 'llama-3.1-8b'; yaml.safe_dump(d, open(sys.argv[2], 'w'), sort_keys=False)" \
  $REPO/docs/evidence/h200-e2e/inventory.yaml $INV && cp $INV $R/inventory.yaml
[ -e /opt/vllm/current ] || { $V install --inventory $INV > $R/install.txt 2>&1; echo "== install rc=$?"; tail -3 $R/install.txt; }
render; grep -E "^Environment=" $R/vllm.service
wipe; T=$(date +%s); serve cold-1
$TOOL pack $INV h200 $T | tee $R/pack-1.txt
stop
