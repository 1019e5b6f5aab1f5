"""The lab's tiny model: built and trained here (build_tiny_model), and altered copies of it for
proving the eval gate (variants)."""
