# Sourced by cold.sh and warm.sh (after calls 1-5 left the wheel pieces in /tmp/w): vfleet from the
# carried tree and its carried wheels, the h200-e2e inventory with the Llama-3.1-8B-shaped model,
# and start/stop of the rendered unit by hand (h200-e2e/device-scripts/start_unit.py).
REPO=$PWD; E=$REPO/docs/evidence/h200-compile-cache; S=$E/device-scripts; S0=$REPO/docs/evidence/h200-e2e/device-scripts
R=$OUT/cc; mkdir -p $R
[ -d /tmp/vsite ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/vsite /tmp/w/deps/*.whl || exit 1
export PYTHONPATH=/tmp/vsite:$REPO PYTHONUNBUFFERED=1 COLUMNS=120
V="python3 -m vfleet.cli"; INV=/tmp/inv-cc.yaml; TOOL="python3 $S/cache_tool.py"
# wipe: every cache a fresh host lacks (vLLM's cache root and the unit's HOME caches, torch's /tmp default)
wipe() { rm -rf /var/cache/vllm /var/lib/vllm/.triton /var/lib/vllm/.cache /tmp/torchinductor_* /root/.triton /root/.cache/vllm; }
# serve NAME: start the rendered unit, time unit start -> /health 200, keep the log's compile lines
serve() {
  local t0=$(date +%s.%N)
  python3 $S0/start_unit.py /tmp/render/h200 $R/vllm-$1.log /tmp/vllm.pid --wait 420; local up=$?
  local s=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" $t0 $(date +%s.%N))
  echo "== $1: start-to-ready ${s}s (rc $up)" | tee -a $R/times.txt
  grep -E "torch.compile|AOT|Directly load|cache directory|Compiling a graph|init engine|Graph capturing|Loading weights took|Model loading took" \
    $R/vllm-$1.log | cut -c1-260 > $R/compile-lines-$1.txt; cat $R/compile-lines-$1.txt
  du -sb /var/cache/vllm/vllm/torch_compile_cache/* /var/cache/vllm/vllm/torch_compile_cache/torch_aot_compile/* 2>/dev/null \
    | tee $R/cache-after-$1.txt
  return $up
}
# the rendered unit, kept in /tmp across calls ($OUT is a new folder each call)
render() { $V render --inventory $INV --dest /tmp/render > /dev/null; echo "== render rc=$?"; cp /tmp/render/h200/etc/systemd/system/vllm.service $R/; }
stop() { python3 $S0/start_unit.py --stop /tmp/vllm.pid --timeout 60; }
