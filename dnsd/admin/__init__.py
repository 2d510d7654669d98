"""The admin HTTP server: API, Prometheus metrics, status page (interfaces.md)."""
