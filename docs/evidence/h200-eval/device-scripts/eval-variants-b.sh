# Device call 8 (right after call 7, /tmp kept): the fp8 variant (weights quantized at load) from
# the same files, its eval scored against the bf16 replies (--reference), its bench; then the
# variants table and PNG.
. docs/evidence/h200-eval/device-scripts/common.sh && . $E/device-scripts/serve-eval-bench.sh
variant fp8 '{quantization: fp8}' --reference $K/eval-bf16.json
cp $K/eval-bf16.json $K/bench-bf16.json $R/
timeout $(left) $V eval.compare $R/eval-bf16.json $R/eval-fp8.json > $R/eval-compare.txt 2>&1; echo "== eval.compare rc=$?"; tail -3 $R/eval-compare.txt
timeout $(left) $V eval.variants --variant bf16=$R/bench-bf16.json,$R/eval-bf16.json \
  --variant fp8=$R/bench-fp8.json,$R/eval-fp8.json --out $R --name variants > $R/variants.txt 2>&1
echo "== eval.variants rc=$?"; cat $R/variants.txt | tail -12
echo "== done at ${SECONDS}s"; pack b
