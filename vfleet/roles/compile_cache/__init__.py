"""The torch.compile cache built once per key and copied to identical hosts (docs/compile-cache.md)."""
