# Device call 7 (after six calls that left the wheel pieces in /tmp/w): the wheelhouse, the
# 0.75B QA model trained on the GPU, `vfleet install`, then the bf16 variant served from vfleet's
# rendered unit: smoke, eval, bench.
cd /tmp/w && cat pa? > all.tar && echo "1853604bc15988e014bf29c1b0892bbc7412d8ae1eed1c0c34c1b4a8f68fa5c4  all.tar" \
  | sha256sum -c && tar -xf all.tar && rm all.tar pa? || exit 1
mkdir -p /opt/vllm/wheelhouse && cp /tmp/w/wheels/*.whl /opt/vllm/wheelhouse/
cd - > /dev/null && . docs/evidence/h200-eval/device-scripts/common.sh && . $E/device-scripts/serve-eval-bench.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $R/gpu.csv
timeout $(left) /opt/torch/.venv/bin/python3 $E/device-scripts/train_qa_gpu.py /tmp/models/qa > $R/train.txt 2>&1
echo "== train rc=$? at ${SECONDS}s"; grep -v "Loading weights\|Writing model" $R/train.txt | tail -4; ls -la /tmp/models/qa
inv base '{}'
vf base install --report $R/install.json
variant bf16 '{}'
echo "== done at ${SECONDS}s"; pack a
