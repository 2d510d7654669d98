"""UDP listener: datagram → resolve → sendto. Synchronous per datagram, no queue."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Callable
from typing import Any

from dnsd.net.counters import NetCounters
from dnsd.net.rrl import ResponseRateLimiter, truncated
from dnsd.resolve import Client

log = logging.getLogger("dnsd.net.udp")

Answerer = Callable[[bytes, Client], bytes | None]
CLIENTS_CACHED = 65_536


class UdpProtocol(asyncio.DatagramProtocol):
    def __init__(
        self, answer: Answerer, counters: NetCounters, rrl: ResponseRateLimiter | None = None
    ) -> None:
        self._answer = answer
        self._counters = counters
        self._rrl = rrl if rrl is not None and rrl.enabled else None
        self._transport: asyncio.DatagramTransport | None = None
        self._clients: dict[str, Client] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self._counters.udp_queries += 1
        client = self._clients.get(addr[0])
        if client is None:  # one Client per source address: the answer cache's memo keys on it
            if len(self._clients) >= CLIENTS_CACHED:
                self._clients.clear()
            client = self._clients[addr[0]] = Client(client_address(addr[0]), "udp")
        try:
            reply = self._answer(data, client)
        except Exception:  # a bug must cost one answer, never the listener
            log.exception("error answering a datagram from %s", addr[0])
            return
        if reply is None:
            self._counters.dropped += 1
            return
        if self._rrl is not None:
            verdict = self._rrl.check(client.address, reply, time.monotonic())
            if verdict == "drop":
                return  # counted by the limiter
            if verdict == "slip":
                reply = truncated(reply)
        assert self._transport is not None
        self._transport.sendto(reply, addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("udp error: %s", exc)


def client_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """Socket address → IP; IPv4-mapped IPv6 (::ffff:a.b.c.d) becomes plain IPv4."""
    addr = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr
