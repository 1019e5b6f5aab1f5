"""Model weights: a manifest of the controller's folder, copied to hosts in waves, checked,
switched atomically by a link."""
