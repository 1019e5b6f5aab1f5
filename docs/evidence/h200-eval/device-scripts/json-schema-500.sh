# Device session 2: why vLLM 0.20.0 answered smoke's json_schema request with HTTP 500 on the
# H200. The lab model (trained on CPU here, 15 s) served by vLLM itself, no vfleet in between;
# the request as smoke sends it, the body printed, then the same with the other backend.
cd /tmp/w && cat pa? > all.tar && echo "1853604bc15988e014bf29c1b0892bbc7412d8ae1eed1c0c34c1b4a8f68fa5c4  all.tar" \
  | sha256sum -c && tar -xf all.tar && rm all.tar pa? || exit 1
cd - > /dev/null
PY=/opt/torch/.venv/bin/python3
$PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/vsite /tmp/w/deps/*.whl /tmp/w/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/vsite:$PWD PYTHONUNBUFFERED=1
$PY -m vfleet.lab.model.build_tiny_model /tmp/models/tiny > /tmp/build.txt 2>&1 || { tail -5 /tmp/build.txt; exit 1; }
R=$OUT/js; mkdir -p $R
ask() {  # ask NAME BODY-JSON
  curl -s -o $R/$1.json -w "$1: HTTP %{http_code}\n" http://127.0.0.1:8000/v1/chat/completions \
    -H 'Content-Type: application/json' -d "$2"; head -c 1500 $R/$1.json; echo
}
SCHEMA='{"type":"object","properties":{"city":{"type":"string"},"country":{"type":"string"}},"required":["city","country"],"additionalProperties":false}'
Q='Give the capital of Germany as a JSON object with keys \"city\" and \"country\". Reply with the JSON only.'
for backend in auto guidance; do
  $PY -m vllm.entrypoints.openai.api_server --model /tmp/models/tiny --served-model-name tiny --port 8000 \
    --max-model-len 2048 --enforce-eager --structured-outputs-config.backend $backend > $R/vllm-$backend.log 2>&1 &
  pid=$!
  for i in $(seq 1 120); do curl -sf http://127.0.0.1:8000/health >/dev/null && break; sleep 1; done
  ask plain-$backend '{"model":"tiny","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16,"temperature":0}'
  ask schema-$backend "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"$Q\"}],\"max_tokens\":48,\"temperature\":0,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"smoke\",\"schema\":$SCHEMA}}}"
  ask object-$backend "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"$Q\"}],\"max_tokens\":48,\"temperature\":0,\"response_format\":{\"type\":\"json_object\"}}"
  kill $pid; wait $pid 2>/dev/null
  grep -n -i -E "error|exception|traceback" $R/vllm-$backend.log | head -20
done
cd $OUT && tar -czf js.tgz js && rm -rf js
