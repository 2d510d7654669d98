"""The admin HTTP server: API, Prometheus metrics, status page (docs/api.md)."""
