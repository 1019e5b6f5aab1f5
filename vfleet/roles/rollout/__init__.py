"""Rolling restarts and upgrades: batches, drain and undrain, rollback points, per-host lines."""
