# Device call 11: two pairs back to back under the same conditions, all logs in one tar:
# (a) cold: every cache wiped, the rendered unit started, its cache packed by vfleet;
# (b) the other host: the cache dir wiped, that export moved to the staging path, installed by
#     vfleet's commands, the same unit started.
. docs/evidence/h200-compile-cache/device-scripts/common.sh
render
for n in 5 6; do
  wipe; T=$(date +%s); serve cold-$n
  $TOOL pack $INV h200 $T | tee $R/pack-$n.txt; stop
  $TOOL move $INV h200 /tmp/wire-$n | tee $R/move-$n.txt
  rm -rf /var/lib/vllm/.triton /var/lib/vllm/.cache /tmp/torchinductor_* /root/.triton
  $TOOL install $INV h200 | tee $R/install-$n.txt
  serve warm-$n; stop
done
cd $OUT && tar -czf cc.tgz cc && rm -rf cc && ls -la
