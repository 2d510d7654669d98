"""A small asyncio DNS client for drills: UDP queries with a timeout and one retry, and TCP
where a stub resolver would use it (a truncated reply; the first query of a cookie client)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from dnslib import EDNS0, QTYPE, RCODE, DNSRecord, EDNSOption

COOKIE_OPTION = 10  # RFC 7873


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
    """One UDP socket to one server; answers are matched to queries by ID.

    `cookie`: send a DNS cookie (RFC 7873) and echo the server cookie dnsd answers with: a
    query with a valid server cookie is never rate limited (docs/dns.md), so a drill can
    ask hundreds of times a second, as a ramp's shares need, without turning RRL off. Until
    it knows its server cookie such a client asks over TCP, which is never rate limited: over
    UDP its first queries would share the limited bucket with its own cookie-carrying ones and
    could be dropped twice in a row. A truncated reply (RRL's slip, or a large answer) is asked
    again over TCP, as dig and every stub resolver do."""

    def __init__(
        self, host: str, port: int, timeout_s: float = 1.0, tries: int = 2, cookie: bool = False
    ) -> None:
        self.host, self.port = host, port
        self.timeout_s, self.tries = timeout_s, tries
        self._proto: _Protocol | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._rng = random.Random()
        self._client_cookie = self._rng.randbytes(8) if cookie else b""
        self._server_cookie = b""

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
        if self._client_cookie and not self._server_cookie:
            reply = await self._ask_tcp(self._question(name, qtype, ecs))
            if reply is not None:
                return self._answer(at, reply)
        for _ in range(self.tries):  # like dig: a lost datagram is retried
            q = self._question(name, qtype, ecs)
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
            if reply.header.tc:
                reply = await self._ask_tcp(q)
                if reply is None:
                    continue
            return self._answer(at, reply)
        return Answer(at, "TIMEOUT", (), None)

    def _question(self, name: str, qtype: str, ecs: EDNSOption | None) -> DNSRecord:
        q = DNSRecord.question(name, qtype)
        opts = [] if ecs is None else [ecs]
        if self._client_cookie:
            opts.append(EDNSOption(COOKIE_OPTION, self._client_cookie + self._server_cookie))
        if opts:
            q.add_ar(EDNS0(udp_len=1232, opts=opts))
        q.header.id = self._rng.randrange(65536)
        return q

    async def _ask_tcp(self, q: DNSRecord) -> DNSRecord | None:
        """The reply over TCP (RFC 7766 framing), or None when it does not come in time."""
        wire = q.pack()
        writer = None
        try:
            async with asyncio.timeout(self.timeout_s * self.tries):
                reader, writer = await asyncio.open_connection(self.host, self.port)
                writer.write(len(wire).to_bytes(2, "big") + wire)
                size = int.from_bytes(await reader.readexactly(2), "big")
                return DNSRecord.parse(await reader.readexactly(size))
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            return None
        finally:
            if writer is not None:
                writer.close()

    def _answer(self, at: float, reply: DNSRecord) -> Answer:
        if self._client_cookie:
            self._learn_cookie(reply)
        addrs = tuple(sorted(str(rr.rdata) for rr in reply.rr if rr.rtype in (QTYPE.A, QTYPE.AAAA)))
        ttl = min((rr.ttl for rr in reply.rr), default=None)
        return Answer(at, RCODE.get(reply.header.rcode), addrs, ttl)

    def _learn_cookie(self, reply: DNSRecord) -> None:
        for rr in reply.ar:
            if rr.rtype != QTYPE.OPT:
                continue
            for opt in rr.rdata:
                data = bytes(opt.data)
                if opt.code == COOKIE_OPTION and data[:8] == self._client_cookie:
                    self._server_cookie = data[8:40]
