"""One package per role. Each reads facts and plans changes (or none) for one part of a
serving host: preflight, weights, install, service, gateway, rollout, replica, monitoring,
verify. Roles import the engine, the configuration and the templates, never the clients or the CLI."""
