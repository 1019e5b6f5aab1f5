"""What talks to a running service over HTTP: the smoke checks, the load generator, the bench
sweep. Below the roles: a rollout smoke-checks each host it restarted before it undrains it, so
the rollout role uses the smoke client; a client never changes a host."""
