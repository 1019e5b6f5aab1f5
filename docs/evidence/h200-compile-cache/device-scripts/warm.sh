# Device call 9 (call 8 lacked the rendered unit: $OUT is new each call; its install had worked):
# (b) "the other host": the cache dir wiped, the export of call 7's cold start (kept on the wire,
# /tmp/wire) put at its staging path and installed by vfleet's commands, then started; a second
# cold start from nothing, packed, moved, installed, started (a second sample of each); then what
# the key says of hosts that differ (c).
. docs/evidence/h200-compile-cache/device-scripts/common.sh
render
$TOOL stage $INV h200 /tmp/wire | tee $R/stage-1.txt
rm -rf /var/lib/vllm/.triton /var/lib/vllm/.cache /tmp/torchinductor_* /root/.triton
$TOOL install $INV h200 | tee $R/install-1.txt
serve warm-1; stop
wipe; T=$(date +%s); serve cold-2
$TOOL pack $INV h200 $T | tee $R/pack-2.txt; stop
$TOOL move $INV h200 /tmp/wire2 | tee $R/move-2.txt; rm -rf /var/lib/vllm/.triton /var/lib/vllm/.cache /tmp/torchinductor_* /root/.triton
$TOOL install $INV h200 | tee $R/install-2.txt
serve warm-2; stop
for s in max_model_len=16384 'vllm_env={VLLM_USE_AOT_COMPILE: "0"}' vllm_version=0.21.0 service_name=vllm-b dtype=float16; do
  $TOOL compare $INV h200 "$s"; done | tee $R/key-differs.txt
