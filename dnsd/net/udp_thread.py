"""UDP served by a blocking socket loop in its own thread: a batch of datagrams in
(recvmmsg), the batch answered, the replies out (sendmmsg); recvfrom and sendto one at a
time where the batched calls are missing.

Measured faster than the asyncio and uvloop datagram protocols for this workload (README,
"Performance"): no event-loop bookkeeping, no transport objects, one thread that only
does this. The asyncio loop keeps TCP, the admin API and the probes. Answering is
synchronous and never awaits, so the thread needs no locks beyond the GIL; it has its
own answer cache.

Two loops, one behaviour: the *compiled* one (dnsd/_fastloop.c, built at install when a C
compiler is present) answers the answer cache's hits in C — the same tables, the same
random source, the same metrics — and hands everything else to the Python answerer; the
*pure* one (dnsd.net.mmsg through ctypes) hands every query to it. The log says which
serves. tests/property/test_serving_loops.py checks they send the same bytes.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from dnsd.net import mmsg
from dnsd.net.rrl import ResponseRateLimiter, limited
from dnsd.net.supervisor import ServingLoops, supervise
from dnsd.net.udp import new_client
from dnsd.reply import Client

if TYPE_CHECKING:
    from dnsd.fastpath import AnswerCache

_fastloop: ModuleType | None
try:
    import dnsd._fastloop as _fastloop
except ImportError:  # built without a C compiler: the pure loop serves
    _fastloop = None

log = logging.getLogger("dnsd.net.udp")
# (queries, their clients[, the outcome the compiled loop drew for each or None]) → replies
BatchAnswerer = Callable[..., list[bytes | None]]


def compiled_available() -> bool:
    """Whether the compiled loop was built (and this platform has recvmmsg)."""
    return _fastloop is not None and mmsg.available()


@dataclass(frozen=True, slots=True)
class CacheHits:
    """What the compiled loop needs to answer cache hits itself: the loop's answer cache,
    random source and metrics tally (DnsServer.answering builds it beside the answerer)."""

    cache: AnswerCache
    rng: random.Random
    counts: dict[bytes, int]  # the tally's per-reply counts
    prepare: Callable[[], None]  # per batch: the cache checks snapshot, health and clock
    record: Callable[[int, int, float], None]  # (answered, queries, seconds) → the histogram


class UdpThread:
    def __init__(
        self,
        sock: socket.socket,
        answer: BatchAnswerer,
        rrl: ResponseRateLimiter | None,
        hits: CacheHits | None = None,
        serving_loop: str = "auto",
        loops: ServingLoops | None = None,
    ) -> None:
        self.sock = sock
        self._answer = answer
        self._rrl = rrl if rrl is not None and rrl.enabled else None
        self._hits = hits
        self._stopping = False
        self.why = ""
        self.loop = self._choose(serving_loop)
        host, port = sock.getsockname()[:2]
        loops = loops if loops is not None else ServingLoops()
        self.state = loops.add(self.loop, f"udp {host} port {port}")
        self._faults = loops.faults
        self._thread = threading.Thread(target=self._run, name="dnsd udp", daemon=True)

    def _choose(self, wanted: str) -> str:
        """ "compiled" or "pure", and why (for the log line)."""
        if wanted == "pure":
            self.why = "--serving-loop pure"
        elif not compiled_available():
            if wanted == "compiled":
                raise RuntimeError("--serving-loop compiled: dnsd._fastloop was not built")
            self.why = "dnsd._fastloop was not built at install (no C compiler)"
        elif self._hits is None:
            self.why = "no answer cache, or --query-log-sample sees every reply"
        else:
            self.why = "dnsd._fastloop"
            return "compiled"
        return "pure"

    def start(self) -> None:
        host, port = self.sock.getsockname()[:2]
        log.info("udp %s port %d: the %s serving loop answers (%s)", host, port, self.loop,
                 self.why)  # fmt: skip
        self._thread.start()

    def _run(self) -> None:
        """The loop, supervised: an unexpected error is logged, counted and the loop started
        again (dnsd.net.supervisor); it never ends silently."""
        supervise(self.state, self._serve, lambda: self._stopping)

    def _serve(self, started: Callable[[], None]) -> None:
        if self._faults is not None:
            self._faults.check(self.loop)
        if self.loop == "compiled":
            assert _fastloop is not None and self._hits is not None
            self._run_compiled(self._hits, started)
        elif mmsg.available():
            self._run_batched(mmsg.DatagramBatch(self.sock), started)
        else:
            self._run_plain(started)

    def _run_compiled(self, hits: CacheHits, started: Callable[[], None]) -> None:
        """recvmmsg → the cache's hits answered in C → the rest in Python → sendmmsg."""
        assert _fastloop is not None
        batch = _fastloop.Batch(self.sock.fileno(), self.sock.family == socket.AF_INET, 64)
        faults, count_answers = self._faults, self.state.count
        answer, rrl, cache, rng = self._answer, self._rrl, hits.cache, hits.rng
        memos, counts, lb_counts = cache.memos("udp"), hits.counts, cache.lb_counts
        prepare, record, perf_counter = hits.prepare, hits.record, time.perf_counter

        rate_limit = self._outgoing if rrl is not None else None  # what _queue applies too
        clients: dict[Any, Client] = {}
        started()
        while (count := self._received(batch)) is not None:
            if not count:
                continue
            if faults is not None:
                faults.check(self.loop)
            began = perf_counter()
            prepare()
            misses, answered = batch.answer_hits(
                clients, memos, rng, lb_counts, counts, rate_limit, cache.count_fallback
            )
            cache.hits += answered
            count_answers("compiled", answered)
            record(answered, count, perf_counter() - began)
            if misses:
                # A datagram cut by the kernel (None) goes in empty: dropped and counted.
                wires = [batch.datagram(i) or b"" for i, _ in misses]
                whos = [self._client(clients, batch, i) for i, _ in misses]
                replies = answer(wires, whos, [drawn for _, drawn in misses])
                self._queue(batch, [i for i, _ in misses], replies, whos, wires)
            self._flush(batch)

    def _received(self, batch: Any) -> int | None:
        """How many datagrams the next receive brought (0: none, try again); None once the
        thread is stopping."""
        try:
            count = int(batch.receive())
        except OSError:
            count = 0
        return None if self._stopping else count

    def _queue(
        self,
        batch: Any,
        indices: list[int],
        replies: list[bytes | None],
        clients: list[Client],
        wires: list[bytes],
    ) -> None:
        """Queue each reply to its sender, through response rate limiting."""
        queued = 0
        for i, reply, client, wire in zip(indices, replies, clients, wires, strict=True):
            out = self._outgoing(reply, client, wire)
            if out is not None:
                batch.queue(i, out)
                queued += 1
        self.state.count("pure", queued)  # built by the Python answerer

    def _outgoing(self, reply: bytes | None, client: Client, wire: bytes) -> bytes | None:
        """What is sent for `reply`: None when the answerer dropped it (and counted it) or
        the rate limiter did; else the reply or its truncated slip."""
        if reply is None or self._rrl is None:
            return reply
        return limited(self._rrl, client.address, reply, wire)

    @staticmethod
    def _flush(batch: Any) -> None:
        if batch.queued and batch.flush():
            log.debug("udp: some replies of a batch could not be sent")

    @staticmethod
    def _client(clients: dict[Any, Client], batch: Any, i: int) -> Client:
        key = batch.source_key(i)
        return clients.get(key) or new_client(clients, key, batch.source(i)[0])

    def _run_batched(self, batch: mmsg.DatagramBatch, started: Callable[[], None]) -> None:
        """recvmmsg → answer the batch → sendmmsg: two system calls for up to 64 queries."""
        answer, faults = self._answer, self._faults
        clients: dict[int | bytes, Client] = {}
        started()
        while (count := self._received(batch)) is not None:
            if faults is not None and count:
                faults.check(self.loop)
            # A datagram cut by the kernel (None) goes in empty: dropped and counted.
            wires = [data or b"" for data in batch.datagrams(count)]
            whos = [
                clients.get(key) or new_client(clients, key, batch.source(i)[0])
                for i, key in enumerate(batch.source_keys(count))
            ]
            self._queue(batch, list(range(count)), answer(wires, whos), whos, wires)
            self._flush(batch)

    def _run_plain(self, started: Callable[[], None]) -> None:
        recvfrom, sendto = self.sock.recvfrom, self.sock.sendto
        answer, faults = self._answer, self._faults
        clients: dict[str, Client] = {}
        started()
        while True:
            try:
                data, addr = recvfrom(4096)
            except OSError:
                if self._stopping:
                    return
                continue
            if self._stopping:
                return
            if faults is not None:
                faults.check(self.loop)
            client = clients.get(addr[0]) or new_client(clients, addr[0], addr[0])
            reply = self._outgoing(answer([data], [client])[0], client, data)
            if reply is None:
                continue
            self.state.count("pure", 1)
            try:
                sendto(reply, addr)
            except OSError as exc:
                log.debug("udp send to %s failed: %s", addr[0], exc)

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked recvfrom
        self.sock.close()
        self._thread.join(timeout=5)
