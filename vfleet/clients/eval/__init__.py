"""`vfleet eval`: a fixed prompt set run with deterministic decoding against one vLLM host or a
gateway, scored (exact answer, regex, JSON schema) and, against an earlier report, a divergence
figure from prompt logprobs (docs/eval.md). The interface other parts code against is listed in
the modules: evalset (items), runner (run_eval), report (EvalReport), compare (the gate)."""
