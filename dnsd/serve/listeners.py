"""The DNS listeners: UDP and TCP bound on the same port per listen address, UDP handed to
a blocking socket-loop thread (`--udp-loop thread`) or kept on the event loop, and closed
again at the end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from typing import Any

from dnsd.net.proxy_protocol import ProxyGate
from dnsd.net.rrl import ResponseRateLimiter
from dnsd.net.supervisor import ServingLoops
from dnsd.net.tcp import TcpHandler
from dnsd.net.udp import Answerer, UdpProtocol, UpdateIntake
from dnsd.net.udp_thread import BatchAnswerer, CacheHits, UdpThread

log = logging.getLogger("dnsd.server")  # one logger for every part of serving
# The kernel's receive queue in front of a UDP loop is a delay, not a store: a query waits
# behind every datagram queued before it, so under a flood a deep queue puts a legitimate
# question as far behind as the queue is long (4 MiB held ~10,000 queries: 250 ms behind a
# random-name flood on a shared core, bench/README.md). The queue holds instead what the
# loop serving it works off in about QUEUE_BOUND_S on its own core; past that the kernel
# drops, which a resolver retries (Knot and gdnsd keep the kernel's default, ~256 queries).
QUEUE_BOUND_S = 0.003
# One core (bench/README.md): compiled 366,000–372,000 QPS, pure 0.82× gdnsd (~79,000).
LOOP_RATE_QPS = {"compiled": 340_000, "pure": 80_000}
QUERY_TRUESIZE = 832  # bytes Linux charges a receive queue per small query (measured)


class DnsListeners:
    def __init__(
        self,
        tcp_handler: TcpHandler,
        loop_udp_answer: Answerer,
        thread_answering: Callable[[], tuple[BatchAnswerer, CacheHits | None]],
        rrl: ResponseRateLimiter,
        loops: ServingLoops,
        udp_loop: str,
        serving_loop: str,
        reuse_port: bool,
        proxy: ProxyGate | None = None,
        tapped: bool = False,
    ) -> None:
        self.proxy = proxy  # --proxy-protocol-from: both UDP loops unwrap PROXY v2 headers
        self.tapped = tapped  # dnstap: the loops pass each query's addresses
        self.tcp_handler = tcp_handler
        self.loop_udp_answer = loop_udp_answer  # the event loop's UDP: shares TCP's cache
        self.thread_answering = thread_answering  # a new UDP thread's own cache and tally
        self.rrl = rrl
        self.loops = loops
        self.udp_loop = udp_loop
        self.serving_loop = serving_loop
        self.reuse_port = reuse_port
        self.bound: list[tuple[str, int]] = []
        self.udp_threads: list[UdpThread] = []
        self._udp: list[asyncio.DatagramTransport] = []
        self._tcp: list[asyncio.Server] = []
        self.updates: UpdateIntake | None = None  # set by the server before binding

    async def bind_all(self, listen: tuple[tuple[str, int], ...]) -> None:
        for host, port in listen:
            self.bound.append(await self.bind(host, port))
        for host, port in self.bound:
            log.info("listening on %s port %d (udp+tcp; udp loop: %s)", host, port, self.udp_loop)

    async def bind(self, host: str, port: int) -> tuple[str, int]:
        """Bind TCP and UDP on the same port; with port 0, find one free for both."""
        loop = asyncio.get_running_loop()
        for _ in range(20):
            reuse_port = self.reuse_port or None
            tcp = await asyncio.start_server(
                self.tcp_handler, host, port, reuse_address=True, reuse_port=reuse_port
            )
            actual = tcp.sockets[0].getsockname()[1]
            try:
                udp, _ = await loop.create_datagram_endpoint(
                    lambda: UdpProtocol(
                        self.loop_udp_answer, self.rrl, self.updates, self.proxy, self.tapped
                    ),
                    local_addr=(host, actual),
                    family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                    reuse_port=reuse_port,
                )
            except OSError:
                tcp.close()
                if port:
                    raise
                continue
            self._tcp.append(tcp)
            if self.udp_loop == "thread":
                # Hand the bound socket to a blocking loop thread instead of the event loop.
                sock = udp.get_extra_info("socket").dup()
                udp.close()
                sock.setblocking(True)
                # Each thread has its own cache and tally: nothing per query is shared.
                own, hits = self.thread_answering()
                thread = UdpThread(
                    sock,
                    own,
                    self.rrl,
                    hits,
                    self.serving_loop,
                    self.loops,
                    self._from_thread(loop),
                    self.proxy,
                    self.tapped,
                )
                size_receive_buffer(sock, thread.loop)
                self.udp_threads.append(thread)
                thread.start()
            else:
                size_receive_buffer(udp.get_extra_info("socket"), "pure")
                self._udp.append(udp)
            return host, actual
        raise OSError(f"no free port for both UDP and TCP on {host}")

    def _from_thread(self, loop: asyncio.AbstractEventLoop) -> UpdateIntake | None:
        """The UPDATE intake for a UDP thread: handed to the event loop."""
        updates = self.updates
        if updates is None:
            return None

        def intake(wire: bytes, client: Any, respond: Callable[[bytes], object]) -> None:
            loop.call_soon_threadsafe(updates, wire, client, respond)

        return intake

    async def close(self) -> None:
        """UDP first, then TCP: the open TCP connections are closed, then waited for."""
        for udp in self._udp:
            udp.close()
        for thread in self.udp_threads:
            await asyncio.to_thread(thread.stop)
        for tcp in self._tcp:
            tcp.close()
        await self.tcp_handler.close_all()
        for tcp in self._tcp:
            await tcp.wait_closed()


def receive_buffer_bytes(serving_loop: str) -> int:
    """What SO_RCVBUF is set to for a socket `serving_loop` ("compiled" or "pure") reads:
    QUEUE_BOUND_S of its rate in small queries. Linux doubles the value asked for (its
    bookkeeping) and caps it at net.core.rmem_max."""
    queries = LOOP_RATE_QPS[serving_loop] * QUEUE_BOUND_S
    return int(queries * QUERY_TRUESIZE) // 2


def size_receive_buffer(sock: socket.socket, serving_loop: str) -> None:
    """Bound the kernel's queue in front of the loop (QUEUE_BOUND_S, above)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes(serving_loop))
