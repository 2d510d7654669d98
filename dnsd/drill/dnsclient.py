"""A small asyncio DNS client for drills: UDP queries with a timeout and one retry."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from dnslib import EDNS0, QTYPE, RCODE, DNSRecord, EDNSOption


@dataclass(frozen=True, slots=True)
class Answer:
    at: float  # seconds since the drill started
    rcode: str  # NOERROR, SERVFAIL, … or TIMEOUT
    addresses: tuple[str, ...]
    ttl: int | None

    @property
    def lost(self) -> bool:
        return self.rcode in ("TIMEOUT", "SERVFAIL")


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[bytes]] = {}

    def datagram_received(self, data: bytes, addr: object) -> None:
        if len(data) >= 2:
            fut = self.waiting.pop(int.from_bytes(data[:2], "big"), None)
            if fut is not None and not fut.done():
                fut.set_result(data)


class DnsClient:
    """One UDP socket to one server; answers are matched to queries by ID."""

    def __init__(self, host: str, port: int, timeout_s: float = 1.0, tries: int = 2) -> None:
        self.host, self.port = host, port
        self.timeout_s, self.tries = timeout_s, tries
        self._proto: _Protocol | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._rng = random.Random()

    async def open(self) -> DnsClient:
        loop = asyncio.get_running_loop()
        self._transport, self._proto = await loop.create_datagram_endpoint(
            _Protocol, remote_addr=(self.host, self.port)
        )
        return self

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    async def query(
        self, name: str, at: float, qtype: str = "A", ecs: EDNSOption | None = None
    ) -> Answer:
        """`ecs`: ask as a client in that subnet (a drill plan's vantage point)."""
        assert self._proto is not None and self._transport is not None
        for _ in range(self.tries):  # like dig: a lost datagram is retried
            q = DNSRecord.question(name, qtype)
            if ecs is not None:
                q.add_ar(EDNS0(udp_len=1232, opts=[ecs]))
            q.header.id = self._rng.randrange(65536)
            fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            self._proto.waiting[q.header.id] = fut
            self._transport.sendto(q.pack())
            try:
                async with asyncio.timeout(self.timeout_s):
                    data = await fut
            except TimeoutError:
                self._proto.waiting.pop(q.header.id, None)
                continue
            reply = DNSRecord.parse(data)
            addrs = tuple(
                sorted(str(rr.rdata) for rr in reply.rr if rr.rtype in (QTYPE.A, QTYPE.AAAA))
            )
            ttl = min((rr.ttl for rr in reply.rr), default=None)
            return Answer(at, RCODE.get(reply.header.rcode), addrs, ttl)
        return Answer(at, "TIMEOUT", (), None)
