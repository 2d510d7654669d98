"""UDP listener: datagram → resolve → sendto. Synchronous per datagram, no queue."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Callable
from typing import Any

from dnsd.net.proxy_protocol import ProxyGate
from dnsd.net.rrl import ResponseRateLimiter, limited
from dnsd.reply import Client

log = logging.getLogger("dnsd.net.udp")

# dnstap (dnsd.net.dnstap): where a query came in — (client port, server address, server port)
Source = tuple[int, str, int]
Answerer = Callable[..., bytes | None]  # (query, client[, its Source when tapped]) → reply
# An RFC 2136 UPDATE handed over (dnsd.serve.updates): it answers later through the
# callable it is given, off the serving loop.
UpdateIntake = Callable[[bytes, Client, Callable[[bytes], object]], None]


def is_update(wire: bytes) -> bool:
    """A query (QR clear) with opcode UPDATE (5)."""
    return len(wire) > 2 and wire[2] & 0xF8 == 0x28


CLIENTS_CACHED = 65_536


class UdpProtocol(asyncio.DatagramProtocol):
    def __init__(
        self,
        answer: Answerer,
        rrl: ResponseRateLimiter | None = None,
        updates: UpdateIntake | None = None,
        proxy: ProxyGate | None = None,
        tapped: bool = False,
    ) -> None:
        self._answer = answer
        self._updates = updates
        self._proxy = proxy  # --proxy-protocol-from: datagrams are unwrapped first
        self._tapped = tapped  # dnstap: each query's Source goes with it
        self._rrl = rrl if rrl is not None and rrl.enabled else None
        self._transport: asyncio.DatagramTransport | None = None
        self._clients: dict[str, Client] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        host = addr[0]
        if self._proxy is not None:
            kept = self._proxy.unwrap(data, host, addr[1])
            if kept is None:
                return  # dropped and counted by the gate
            data, host = kept[0], kept[1]
        client = self._clients.get(host) or new_client(self._clients, host, host)
        if self._updates is not None and is_update(data):
            transport = self._transport
            assert transport is not None
            self._updates(data, client, lambda reply: transport.sendto(reply, addr))
            return
        try:
            if self._tapped:
                assert self._transport is not None
                local = self._transport.get_extra_info("sockname")
                reply = self._answer(data, client, (addr[1], local[0], local[1]))
            else:
                reply = self._answer(data, client)
        except Exception:  # a bug must cost one answer, never the listener
            log.exception("error answering a datagram from %s", host)
            return
        if reply is not None and self._rrl is not None:
            reply = limited(self._rrl, client.address, reply, data)
        if reply is not None:  # None: unanswerable (counted by the answerer) or rate-limited
            assert self._transport is not None
            self._transport.sendto(reply, addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("udp error: %s", exc)


def new_client(clients: dict[Any, Client], key: Any, host: str) -> Client:
    """A Client for a new source, remembered under `key` (the listeners keep one Client per
    source address: the answer cache's memo recognises it by identity). Bounded."""
    if len(clients) >= CLIENTS_CACHED:
        clients.clear()
    client = clients[key] = Client(client_address(host), "udp")
    return client


def client_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """Socket address → IP; IPv4-mapped IPv6 (::ffff:a.b.c.d) becomes plain IPv4."""
    addr = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr
