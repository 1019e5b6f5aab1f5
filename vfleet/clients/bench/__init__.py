"""`vfleet bench`: a load sweep against an OpenAI-compatible endpoint (a vfleet gateway or one
vLLM host) that finds the knee and says what max_num_seqs to set.

    prompts        synthetic (distinct per request), JSONL chat messages, ShareGPT files
    client         one streamed request, timed; tokens from the server's usage
    sweep          bounded levels: concurrency (N in flight) or Poisson rates, warm-up first
    server_metrics each host's /metrics during a level (running, waiting, KV cache, preemptions)
    stats          per level: throughput, TTFT/TPOT/ITL/E2E mean and percentiles
    knee           the knee, the suggested max_num_seqs and client limit, the SLO verdict
    output         terminal table, JSON, CSV, PNG
    compare        two results side by side
    run            all of it with progress on the terminal
"""
