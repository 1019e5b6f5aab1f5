"""The lab's tiny model (build_tiny_model)."""
