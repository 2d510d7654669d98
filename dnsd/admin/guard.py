"""The admin server's door: a bounded number of connections, and headers on time.

aiohttp holds a connection that never sends a request for ever; 10,000 of them use up the
descriptors the probes and DNS over TCP need. `ConnectionGuard` wraps aiohttp's protocol
factory: a connection must finish its first request's headers within `header_timeout_s`
(then aiohttp's keep-alive timeout governs it), and at most `max_connections` are open —
a new one closes the oldest that has not sent its headers yet, or is refused when none
has not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

HEADER_END = b"\r\n\r\n"


class ConnectionGuard:
    def __init__(
        self,
        factory: Callable[[], asyncio.Protocol],
        max_connections: int,
        header_timeout_s: float,
    ) -> None:
        self.factory = factory
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.open: dict[GuardedProtocol, None] = {}  # insertion order: oldest first
        self.refused = 0
        self.timed_out = 0

    def __call__(self) -> GuardedProtocol:
        return GuardedProtocol(self, self.factory())

    def admit(self, new: GuardedProtocol) -> bool:
        if len(self.open) >= self.max_connections:
            waiting = next((c for c in self.open if c.awaiting_headers), None)
            if waiting is None:
                self.refused += 1
                return False
            waiting.close()
        self.open[new] = None
        return True


class GuardedProtocol(asyncio.Protocol):
    """Passes everything to aiohttp's own protocol; watches only the first headers."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.awaiting_headers = True
        self._tail = b""
        self._timer: asyncio.TimerHandle | None = None
        self._admitted = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if not self.guard.admit(self):
            transport.abort()
            return
        self._admitted = True
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.guard.header_timeout_s, self._too_slow)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.awaiting_headers:
            seen = self._tail + data
            if HEADER_END in seen:
                self.awaiting_headers = False
                if self._timer is not None:
                    self._timer.cancel()
            self._tail = seen[-(len(HEADER_END) - 1) :]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.open.pop(self, None)
        if self._timer is not None:
            self._timer.cancel()
        if self._admitted:
            self.inner.connection_lost(exc)

    def _too_slow(self) -> None:
        if self.awaiting_headers:
            self.guard.timed_out += 1
            self.close()

    def close(self) -> None:
        self.awaiting_headers = False
        if self.transport is not None:
            self.transport.abort()
