"""The multi-region lab in network namespaces (docs/lab.md)."""
