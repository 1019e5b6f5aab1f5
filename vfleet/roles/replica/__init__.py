"""Multi-host replicas (Ray or vLLM's own multi-node): member facts, checks, units, rollout."""
