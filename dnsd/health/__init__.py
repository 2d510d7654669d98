"""Health: probe state machines, the store, and the immutable view steering reads."""
