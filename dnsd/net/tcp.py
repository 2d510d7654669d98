"""TCP listener per RFC 7766: 2-byte length framing, pipelined queries answered in order,
idle and read timeouts, and a connection cap. A stalled client only holds its own task."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from dnsd.net import proxy_protocol
from dnsd.net.counters import NetCounters
from dnsd.net.proxy_protocol import ProxyGate
from dnsd.net.supervisor import ServingLoops
from dnsd.net.udp import Answerer, Source, client_address, is_update
from dnsd.ratelog import RateLimitedLog
from dnsd.reply import Client
from dnsd.xfr.outgoing import transfer_type

log = logging.getLogger("dnsd.net.tcp")
FAILURE_LOG = RateLimitedLog(log)


@dataclass(frozen=True, slots=True)
class TcpLimits:
    max_connections: int = 512
    max_per_client: int = 64  # one /24 (/56) cannot take every connection
    idle_timeout_s: float = 10.0  # waiting for the first byte of the next query
    read_timeout_s: float = 5.0  # waiting for the rest of a query once it started
    write_timeout_s: float = 5.0  # a client that does not read its answers


@dataclass(slots=True)
class _Connection:
    writer: asyncio.StreamWriter
    idle_since: float | None = None  # waiting for the next query since (loop time)


def client_network(host: str) -> str:
    """The per-client cap counts a /24 (IPv4) or /56 (IPv6): one host rarely has one
    address of a network to itself, and an attacker rarely has only one."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    prefix = 24 if address.version == 4 else 56
    return str(ipaddress.ip_network((address, prefix), strict=False))


# AXFR/IXFR: the reply messages for a transfer query (dnsd.xfr.service).
Transfers = Callable[[bytes, Client], Awaitable[list[bytes]]]
# RFC 2136 UPDATE: the reply once applied (dnsd.serve.updates).
Updates = Callable[[bytes, Client], Awaitable[bytes]]


class TcpHandler:
    def __init__(
        self,
        answer: Answerer,
        counters: NetCounters,
        limits: TcpLimits,
        transfers: Transfers | None = None,
        loops: ServingLoops | None = None,
        updates: Updates | None = None,
        proxy: ProxyGate | None = None,
        tapped: bool = False,
    ) -> None:
        self.updates = updates  # set by the server (the main process applies UPDATEs)
        loops = loops if loops is not None else ServingLoops()
        self._proxy = proxy  # --proxy-protocol-from: connections open with a header
        self._tapped = tapped  # dnstap: each query's Source goes with it
        self.state = loops.add("tcp", "tcp")
        self._faults = loops.faults
        self._answer = answer
        self._transfers = transfers
        self._counters = counters
        self._limits = limits
        self.active = 0
        self._per_client: dict[str, int] = {}  # bounded: entries only for open connections
        self._open: dict[asyncio.Task[None], _Connection] = {}

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """Its Prometheus collector (Metrics.register)."""
        active = GaugeMetricFamily("dnsd_tcp_connections", "Open TCP connections")
        active.add_metric([], self.active)
        yield active
        rejected = CounterMetricFamily("dnsd_tcp_rejected", "TCP connections refused at the cap")
        rejected.add_metric([], self._counters.tcp_rejected)
        yield rejected

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        host = peer[0] if peer else ""
        # A balancer's connections carry many clients: only the total cap applies to them.
        network = (
            "" if self._proxy is not None and self._proxy.listed(host) else client_network(host)
        )
        if (network and self._per_client.get(network, 0) >= self._limits.max_per_client) or (
            self.active >= self._limits.max_connections and not self._evict_idle()
        ):
            self._counters.tcp_rejected += 1
            writer.close()
            return
        self.active += 1
        self._per_client[network] = self._per_client.get(network, 0) + 1
        self._counters.tcp_connections += 1
        connection = _Connection(writer)
        task = asyncio.current_task()
        if task is not None:
            self._open[task] = connection
        try:
            pending = b""
            if self._proxy is not None:
                opened = await self._opening(reader, host)
                if opened is None:
                    return  # dropped and counted by the gate
                host, pending = opened
            client = Client(client_address(host), "tcp")
            source: Source | None = None
            if self._tapped and peer:
                local = writer.get_extra_info("sockname")
                source = (peer[1], local[0], local[1])
            await self._serve(reader, writer, client, connection, pending, source)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except TimeoutError:
            self._counters.tcp_timeouts += 1
        except asyncio.CancelledError:
            pass  # the server is stopping: nothing awaits this task's result
        except Exception as exc:
            # A bug: this connection ends, the listener goes on. Logged through our logger
            # (not asyncio's raw stderr), at a bounded rate, and counted.
            self.state.restarts += 1
            FAILURE_LOG.log(
                time.monotonic(),
                logging.ERROR,
                "tcp: a connection's handler failed (%s: %s); the listener goes on",
                type(exc).__name__,
                exc,
                exc_info=True,
            )
        finally:
            self.active -= 1
            left = self._per_client.pop(network, 1) - 1
            if left > 0:
                self._per_client[network] = left
            self._open.pop(task, None)  # type: ignore[arg-type]
            writer.close()

    async def _opening(self, reader: asyncio.StreamReader, peer: str) -> tuple[str, bytes] | None:
        """A connection's start through the PROXY v2 gate: (the client's host, the bytes
        read past the header), or None when it is dropped (counted). A listed peer's header
        is bounded (MAX_BODY) and must arrive within the read timeout; from a peer not
        listed the first 12 bytes (a DNS message over TCP has at least 14) must not be a
        PROXY signature."""
        assert self._proxy is not None
        gate, limits = self._proxy, self._limits
        if not gate.listed(peer):
            async with asyncio.timeout(limits.idle_timeout_s):
                try:
                    start = await reader.readexactly(12)
                except asyncio.IncompleteReadError as exc:
                    return peer, exc.partial  # a short message: read and answered as any other
            if start == proxy_protocol.SIGNATURE:
                gate.drop(proxy_protocol.UNLISTED)
                return None
            return peer, start
        data = b""
        try:
            async with asyncio.timeout(limits.read_timeout_s):
                data = await reader.readexactly(12)
                if data != proxy_protocol.SIGNATURE:
                    gate.drop(proxy_protocol.MISSING)
                    return None
                data += await reader.readexactly(4)
                length = proxy_protocol.header_length(data)
                if isinstance(length, str):
                    gate.drop(length)
                    return None
                data += await reader.readexactly(length - len(data))
        except (TimeoutError, asyncio.IncompleteReadError) as exc:
            partial = getattr(exc, "partial", b"")
            gate.drop(
                proxy_protocol.MISSING
                if len(data + partial) < 12
                and not proxy_protocol.SIGNATURE.startswith(data + partial)
                else proxy_protocol.TRUNCATED
            )
            return None
        header = proxy_protocol.parse(data)
        if isinstance(header, str):
            gate.drop(header)
            return None
        return (header.host or peer), b""

    def _evict_idle(self) -> bool:
        """RFC 7766 §6.2.3: when full, close the connection idle the longest (waiting for its
        next query) to make room; False when every connection is busy."""
        idle = [c for c in self._open.values() if c.idle_since is not None]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.idle_since or 0.0)
        oldest.idle_since = None
        oldest.writer.transport.abort()  # its read ends at once; its task frees the slot
        self._counters.tcp_evicted += 1
        return True

    async def close_all(self) -> None:
        """Cut every open connection (used when the server stops)."""
        tasks = list(self._open)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client: Client,
        connection: _Connection,
        pending: bytes = b"",  # read already (past a PROXY header, or to look for one)
        source: Source | None = None,
    ) -> None:
        limits = self._limits
        loop = asyncio.get_running_loop()
        while True:
            connection.idle_since = loop.time()
            try:
                async with asyncio.timeout(limits.idle_timeout_s):
                    first, pending = await _take(reader, pending, 1)
            except asyncio.IncompleteReadError:
                return  # clean close between messages
            connection.idle_since = None
            async with asyncio.timeout(limits.read_timeout_s):
                second, pending = await _take(reader, pending, 1)
                (length,) = struct.unpack("!H", first + second)
                body, pending = await _take(reader, pending, length)
            if self._faults is not None:
                self._faults.check("tcp")
            if self._transfers is not None and transfer_type(body) is not None:
                replies: list[bytes | None] = list(await self._transfers(body, client))
            elif self.updates is not None and is_update(body):
                replies = [await self.updates(body, client)]
            else:
                replies = [
                    self._answer(body, client)
                    if source is None
                    else self._answer(body, client, source)
                ]
            for reply in replies:
                if reply is None:  # unanswerable (counted by the answerer): close
                    return
                writer.write(struct.pack("!H", len(reply)) + reply)
                self.state.count("tcp", 1)
                async with asyncio.timeout(limits.write_timeout_s):
                    await writer.drain()


async def _take(reader: asyncio.StreamReader, pending: bytes, n: int) -> tuple[bytes, bytes]:
    """`n` bytes: from what was read already first, then from the stream; and what is left."""
    if len(pending) >= n:
        return pending[:n], pending[n:]
    return pending + await reader.readexactly(n - len(pending)), b""
