"""The vLLM systemd service: its argv, the unit and environment file, restart and readiness."""
