# Device call 7 (right after call 6: /opt/vllm holds the installed venv, /tmp/models the target,
# /tmp/src the draft and adapters, /tmp/vsite vfleet's wheels): the speculative configuration
# (draft_model, Llama-3.2-1B shape, 3 tokens); if vLLM refuses it at start, ngram instead; then,
# if time is left, the rank-256 LoRA configuration (lora-heavy.sh).
. docs/evidence/h200-lora-spec/device-scripts/common.sh
links() { mkdir -p /tmp/models/draft && ln -sfn /tmp/src/draft-1b /tmp/models/draft/vllm; ls -la /tmp/models/draft; }
inv spec '{model_name: llama-3.1-8b, speculative_decoding: {method: draft_model, source: /tmp/src/draft-1b, num_speculative_tokens: 3}}'
serve spec 400; up=$?
serve_stop; keep_log spec
if [ $up != 0 ] && [ $SECONDS -lt 300 ]; then
  echo "== draft_model did not start: ngram instead"
  python3 -c "import numba; print('numba', numba.__version__)"
  links() { :; }
  inv ngram '{model_name: llama-3.1-8b, speculative_decoding: {method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 4}}'
  serve ngram 250; serve_stop; keep_log ngram
fi
if [ $SECONDS -lt 330 ]; then . $S/lora-heavy.sh; else echo "== lora-r256 skipped: ${SECONDS}s gone"; fi
echo "== call took ${SECONDS}s"
cd $OUT && tar -czf spec.tgz ls && rm -rf ls && ls -la
