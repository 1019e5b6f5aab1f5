"""What talks to a running service over HTTP: the smoke checks, the load generator, the bench
sweep. Above the roles: a client never changes a host."""
