"""TCP listener per RFC 7766: 2-byte length framing, pipelined queries answered in order,
idle and read timeouts, and a connection cap. A stalled client only holds its own task."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from dnsd.net.counters import NetCounters
from dnsd.net.udp import Answerer, client_address
from dnsd.reply import Client

log = logging.getLogger("dnsd.net.tcp")


@dataclass(frozen=True, slots=True)
class TcpLimits:
    max_connections: int = 512
    max_per_client: int = 64  # one address cannot take every connection
    idle_timeout_s: float = 10.0  # waiting for the first byte of the next query
    read_timeout_s: float = 5.0  # waiting for the rest of a query once it started
    write_timeout_s: float = 5.0  # a client that does not read its answers


class TcpHandler:
    def __init__(self, answer: Answerer, counters: NetCounters, limits: TcpLimits) -> None:
        self._answer = answer
        self._counters = counters
        self._limits = limits
        self.active = 0
        self._per_client: dict[str, int] = {}  # bounded: entries only for open connections
        self._tasks: set[asyncio.Task[None]] = set()

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
        if (
            self.active >= self._limits.max_connections
            or self._per_client.get(host, 0) >= self._limits.max_per_client
        ):
            self._counters.tcp_rejected += 1
            writer.close()
            return
        self.active += 1
        self._per_client[host] = self._per_client.get(host, 0) + 1
        self._counters.tcp_connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            client = Client(client_address(host), "tcp")
            await self._serve(reader, writer, client)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except TimeoutError:
            self._counters.tcp_timeouts += 1
        finally:
            self.active -= 1
            left = self._per_client.pop(host, 1) - 1
            if left > 0:
                self._per_client[host] = left
            self._tasks.discard(task)
            writer.close()

    async def close_all(self) -> None:
        """Cut every open connection (used when the server stops)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: Client
    ) -> None:
        limits = self._limits
        while True:
            try:
                async with asyncio.timeout(limits.idle_timeout_s):
                    first = await reader.readexactly(1)
            except asyncio.IncompleteReadError:
                return  # clean close between messages
            async with asyncio.timeout(limits.read_timeout_s):
                (length,) = struct.unpack("!H", first + await reader.readexactly(1))
                body = await reader.readexactly(length)
            reply = self._answer(body, client)
            if reply is None:  # unanswerable (counted by the answerer): close
                return
            writer.write(struct.pack("!H", len(reply)) + reply)
            async with asyncio.timeout(limits.write_timeout_s):
                await writer.drain()
