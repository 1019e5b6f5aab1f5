"""One package per role. Each reads facts and plans changes (or none) for one part of a
serving host: preflight, weights, install, service, gateway, rollout, replica, monitoring,
verify. Roles import the engine, the configuration, the templates and the clients (a rollout
smoke-checks what it restarted), never the lab or the CLI."""
