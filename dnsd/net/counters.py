"""Plain counters the network layer keeps (exported as metrics by the admin server)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class NetCounters:
    tcp_connections: int = 0
    tcp_rejected: int = 0  # refused because of the connection cap
    tcp_timeouts: int = 0
    tcp_evicted: int = 0  # idle connections closed to make room for a new one
