"""vLLM install: a pinned vLLM in a versioned venv per host, switched by the `current` link."""
