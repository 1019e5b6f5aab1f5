# Device call 10: two more starts of "the other host" from call 9's second cold start (its
# export, kept on the wire /tmp/wire2): each time the cache dir wiped, the export staged and
# installed by vfleet's commands, then started. Results as one tar (a call returns few files).
. docs/evidence/h200-compile-cache/device-scripts/common.sh
render
for n in 3 4; do
  $TOOL stage $INV h200 /tmp/wire2 | tee $R/stage-$n.txt
  rm -rf /var/lib/vllm/.triton /var/lib/vllm/.cache /tmp/torchinductor_* /root/.triton
  $TOOL install $INV h200 | tee $R/install-$n.txt
  serve warm-$n; stop
done
cd $OUT && tar -czf cc.tgz cc && rm -rf cc && ls -la
