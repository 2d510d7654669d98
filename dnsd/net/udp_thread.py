"""UDP served by a blocking socket loop in its own thread: a batch of datagrams in
(recvmmsg), the batch answered, the replies out (sendmmsg); recvfrom and sendto one at a
time where the batched calls are missing.

Measured faster than the asyncio and uvloop datagram protocols for this workload (README,
"Performance"): no event-loop bookkeeping, no transport objects, one thread that only
does this. The asyncio loop keeps TCP, the admin API and the probes. Answering is
synchronous and never awaits, so the thread needs no locks beyond the GIL; it has its
own answer cache.

Two loops, one behaviour: the *compiled* one (dnsd/_fastloop.c, built at install when a C
compiler is present) walks the answer cache's answer tables in C — the tables the Python
path builds and walks too (dnsd.answer_table), the same random source, the counters the
tables name — and hands everything else to the Python answerer, with what it drew; the
*pure* one (dnsd.net.mmsg through ctypes) hands every query to it. The log says which
serves. tests/property/test_serving_loops.py checks they send the same bytes.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from dnsd.net import mmsg
from dnsd.net.dnstap import SOURCE_BYTES, DnstapWriter, server_address
from dnsd.net.proxy_protocol import ProxyGate
from dnsd.net.rrl import NXNAME_BITMAP, ResponseRateLimiter, limited
from dnsd.net.supervisor import ServingLoops, supervise
from dnsd.net.udp import Source, UpdateIntake, is_update, new_client
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


# The compiled loop's misses wait in a backlog, worked off MISS_BUDGET_S at a time between
# receives; past MAX_BACKLOG the oldest go (a resolver has retried them by then).
MISS_BUDGET_S = 0.0005
MAX_BACKLOG = 2048
MAX_KNOWN = 65536
PROXY_CHECK = 6  # dnsd/_fastloop.c: a datagram the PROXY v2 gate in Python decides  # questions remembered as answered with data (the table starts again)
Miss = tuple[bytes, Client, Any, tuple[str, int]]  # (query, client, drawn outcome, source)


class Backlog:
    """Misses waiting for the Python answerer. Questions this thread has answered with
    data before (their bytes after the ID, in lower case) go first: a flood of names never
    seen — random names, each needing a signature in a signed zone — cannot delay a known
    name whose cached answer a reload or a health change has just cleared."""

    def __init__(self) -> None:
        self.known: deque[Miss] = deque()
        self.new: deque[Miss] = deque()
        self._answered: dict[bytes, None] = {}

    def __bool__(self) -> bool:
        return bool(self.known or self.new)

    def __len__(self) -> int:
        return len(self.known) + len(self.new)

    def add(self, miss: Miss) -> None:
        (self.known if miss[0][2:].lower() in self._answered else self.new).append(miss)

    def next(self) -> Miss:
        return self.known.popleft() if self.known else self.new.popleft()

    def answered(self, wire: bytes, reply: bytes | None) -> None:
        """Remember `wire`'s question when `reply` holds data: NOERROR and not compact
        denial's nonexistent name (NXDOMAINs and random names never count)."""
        if reply is None or len(reply) < 4 or reply[3] & 0x0F or NXNAME_BITMAP in reply:
            return
        if len(self._answered) >= MAX_KNOWN:
            self._answered.clear()
        self._answered[wire[2:].lower()] = None

    def shed(self, limit: int) -> list[Client]:
        """Drop the oldest past `limit`, new questions first; the clients whose went."""
        gone = []
        for queue in (self.new, self.known):
            while len(self) > limit and queue:
                gone.append(queue.popleft()[1])
        return gone


@dataclass(frozen=True, slots=True)
class CacheHits:
    """What the compiled loop needs to answer cache hits itself: the loop's answer cache,
    random source and metrics tally (dnsd.serve.answering builds it beside the answerer)."""

    cache: AnswerCache
    rng: random.Random
    tally: Any  # dnsd.tally.Tally: the compiled loop's answers are counted there
    prepare: Callable[[], None]  # per batch: the cache checks snapshot, health and clock
    record: Callable[[int, int, float], None]  # (answered, queries, seconds) → the histogram
    tap: DnstapWriter | None = None  # dnstap: the compiled loop's frames go to its writer


class UdpThread:
    def __init__(
        self,
        sock: socket.socket,
        answer: BatchAnswerer,
        rrl: ResponseRateLimiter | None,
        hits: CacheHits | None = None,
        serving_loop: str = "auto",
        loops: ServingLoops | None = None,
        updates: UpdateIntake | None = None,
        proxy: ProxyGate | None = None,
        tapped: bool = False,
    ) -> None:
        self.sock = sock
        self._updates = updates  # thread-safe: UPDATEs are applied on the event loop
        self._proxy = proxy  # --proxy-protocol-from: datagrams are unwrapped first
        self._tapped = tapped  # dnstap: each query's Source goes with it
        self._answer = answer
        self._rrl = rrl if rrl is not None and rrl.enabled else None
        self._hits = hits
        self._stopping = False
        self._blocking = True
        self.backlog = Backlog()
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
        log.info(
            "udp %s port %d: the %s serving loop answers (%s)", host, port, self.loop, self.why
        )
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
            log.info("udp: no recvmmsg here: one recvfrom and one sendto per datagram")
            self._run_plain(started)

    def _run_compiled(self, hits: CacheHits, started: Callable[[], None]) -> None:
        """recvmmsg → the cache's answer tables walked in C → the rest in Python →
        sendmmsg. A table C cannot read is counted (`record_batch`) and goes to Python;
        an error C meets is raised here (the supervisor logs it and restarts the loop)."""
        assert _fastloop is not None
        batch = _fastloop.Batch(self.sock.fileno(), self.sock.family == socket.AF_INET, 64)
        hits.cache.count_replies_into(hits.tally)
        gate = self._proxy
        # PROXY v2: the compiled code reads the common headers of the listed peers itself
        # (up to 64 networks); the rest it hands over as PROXY_CHECK, for the gate to decide.
        in_c = gate is not None and len(gate.networks) <= _fastloop.MAX_PROXY_NETS
        if gate is not None and in_c:
            batch.proxy_from([(n.network_address.packed, n.prefixlen) for n in gate.networks])
        tap = hits.tap if self._tapped else None
        if tap is None or not tap.kinds():  # dnstap off, or only UPDATEs wanted
            self._serve_compiled(batch, hits, in_c, None, started)
            return
        # dnstap: the answers given in C are kept as frames in the batch, for the writer.
        host, port = self.sock.getsockname()[:2]
        head, tail = tap.frame_parts()
        every, kinds = tap.settings.sample, tap.kinds()
        batch.tap(head, tail, server_address(host), port, every, kinds, SOURCE_BYTES)
        tap.add_source(batch)
        try:
            self._serve_compiled(batch, hits, in_c, tap, started)
        finally:
            tap.remove_source(batch)

    def _serve_compiled(
        self,
        batch: Any,
        hits: CacheHits,
        in_c: bool,
        tap: DnstapWriter | None,
        started: Callable[[], None],
    ) -> None:
        faults, count_answers = self._faults, self.state.count
        answer, rrl, cache, rng = self._answer, self._rrl, hits.cache, hits.rng
        tables, outcome_of = cache.tables("udp"), cache.outcome_of
        prepare, record, perf_counter = hits.prepare, hits.record, time.perf_counter
        rate_limit = self._outgoing if rrl is not None else None  # what _queue applies too
        clients: dict[Any, Client] = {}
        backlog = self.backlog
        gate = self._proxy
        started()
        while (count := self._received(batch, wait=not backlog)) is not None:
            if count:
                if faults is not None:
                    faults.check(self.loop)
                began = perf_counter()
                proxied = (
                    self._unwrap_compiled(batch, count, clients) if gate and not in_c else None
                )
                prepare()
                misses, answered, fallbacks = batch.answer_hits(
                    tables,
                    rng,
                    cache.counters,
                    rate_limit,
                    clients,
                    cache.zone_tables(),
                    cache.policies if tap is not None else None,
                    cache.shared.for_c() if tap is None else None,
                )
                cache.record_batch(answered, fallbacks)
                count_answers("compiled", answered)
                record(answered, count, perf_counter() - began)
                self._flush(batch)  # the cache's answers leave before any miss is worked on
                for i, (code, value, order) in misses:
                    # A datagram cut by the kernel (None) goes in empty: dropped and counted.
                    wire = batch.datagram(i) or b""
                    if code == PROXY_CHECK and gate is not None and wire:
                        source = batch.source(i)
                        kept = gate.unwrap(wire, *source)
                        if kept is None:
                            continue  # dropped and counted by the gate
                        wire, host = kept[0], kept[1]
                        client = clients.get(host) or new_client(clients, host, host)
                        if not self._divert(wire, client, source):
                            backlog.add((wire, client, None, source))
                        continue
                    client = (proxied and proxied.get(i)) or self._client(clients, batch, i)
                    if self._divert(wire, client, batch.source(i)):
                        continue
                    drawn = outcome_of(wire, code, value, order)  # now: the table it walked
                    backlog.add((wire, client, drawn, batch.source(i)))
                if shed := backlog.shed(MAX_BACKLOG):  # counted where the answerer counts
                    answer([b""] * len(shed), shed)  # its drops: as empty datagrams
            if backlog:
                self._work_off(backlog, answer)

    def _divert(self, wire: bytes, client: Client, source: Any) -> bool:
        """An UPDATE goes to the event loop, which answers it once applied."""
        if self._updates is None or not is_update(wire):
            return False
        sendto = self.sock.sendto
        self._updates(wire, client, lambda reply: sendto(reply, source))
        return True

    def _unwrap_compiled(
        self, batch: Any, count: int, clients: dict[Any, Client]
    ) -> dict[int, Client]:
        """Through the PROXY v2 gate, for the compiled loop: each datagram's header is read
        here and the compiled code told where its query starts and whose it is
        (batch.unwrap), or that it is dropped; the clients the headers carry, by index."""
        assert self._proxy is not None
        split, out, order = self._proxy.split, {}, sys.byteorder
        for i in range(count):
            data = batch.datagram(i)
            if data is None:
                continue  # cut by the kernel: dropped and counted where the batch is read
            got = split(data, batch.source(i)[0])
            if got is None:
                batch.unwrap(i, -1, b"")  # dropped and counted by the gate
                continue
            skip, packed = got
            if not skip:
                continue  # a peer not listed, without a header: its own address
            batch.unwrap(i, skip, packed)
            if not packed:
                continue  # LOCAL: the sender itself
            # The key as the compiled code's source_key makes it.
            key: int | bytes = int.from_bytes(packed, order) if len(packed) == 4 else packed
            client = clients.get(key)
            if client is None:
                af = socket.AF_INET if len(packed) == 4 else socket.AF_INET6
                client = new_client(clients, key, socket.inet_ntop(af, packed))
            out[i] = client
        return out

    def _received(self, batch: Any, wait: bool = True) -> int | None:
        """How many datagrams the next receive brought (0: none, try again); None once the
        thread is stopping. `wait` False: only what is there now (misses wait in the
        backlog), so the socket is non-blocking while the backlog holds any."""
        if wait != self._blocking:
            self.sock.setblocking(wait)
            self._blocking = wait
        try:
            count = int(batch.receive())
        except OSError:
            count = 0
        return None if self._stopping else count

    def _work_off(self, backlog: Backlog, answer: BatchAnswerer) -> None:
        """Answer the backlog's oldest misses for at most MISS_BUDGET_S, then go back to
        the socket: a flood of queries the cache cannot answer (random names, each signed
        in a signed zone) waits here, and never in front of the cache's answers:
        cached answers stay fast while a flood saturates signing."""
        deadline = time.perf_counter() + MISS_BUDGET_S
        sendto = self.sock.sendto
        while backlog and time.perf_counter() < deadline:
            wire, client, drawn, source = backlog.next()
            reply = answer([wire], [client], [drawn], self._sources([source]))[0]
            backlog.answered(wire, reply)
            out = self._outgoing(reply, client, wire)
            if out is not None:
                self.state.count("pure", 1)  # built by the Python answerer
                try:
                    sendto(out, source)
                except OSError as exc:
                    log.debug("udp send to %s failed: %s", source[0], exc)

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

    def _sources(self, peers: list[tuple[str, int]]) -> list[Source] | None:
        """dnstap: each query's (client port, server address, server port); None when off."""
        if not self._tapped:
            return None
        host, port = self.sock.getsockname()[:2]
        return [(peer[1], host, port) for peer in peers]

    @staticmethod
    def _flush(batch: Any) -> None:
        if batch.queued and batch.flush():
            log.debug("udp: some replies of a batch could not be sent")

    @staticmethod
    def _client(clients: dict[Any, Client], batch: Any, i: int) -> Client:
        key = batch.source_key(i)  # a PROXY v2 header's client, if one was read
        client = clients.get(key)
        if client is None:
            host = batch.carried_host(i) or batch.source(i)[0]
            client = new_client(clients, key, host)
        return client

    def _run_batched(self, batch: mmsg.DatagramBatch, started: Callable[[], None]) -> None:
        """recvmmsg → answer the batch → sendmmsg: two system calls for up to 64 queries."""
        answer, faults = self._answer, self._faults
        clients: dict[Any, Client] = {}
        started()
        while (count := self._received(batch)) is not None:
            if faults is not None and count:
                faults.check(self.loop)
            # A datagram cut by the kernel (None) goes in empty: dropped and counted.
            wires = [data or b"" for data in batch.datagrams(count)]
            if self._proxy is not None:
                indices, wires, whos = self._unwrapped(batch, wires, clients)
            else:
                indices = list(range(count))
                whos = [
                    clients.get(key) or new_client(clients, key, batch.source(i)[0])
                    for i, key in enumerate(batch.source_keys(count))
                ]
            if self._updates is not None:
                kept = [
                    j
                    for j, i in enumerate(indices)
                    if not self._divert(wires[j], whos[j], batch.source(i))
                ]
                indices = [indices[j] for j in kept]
                wires, whos = [wires[j] for j in kept], [whos[j] for j in kept]
            sources = self._sources([batch.source(i) for i in indices]) if self._tapped else None
            self._queue(batch, indices, answer(wires, whos, None, sources), whos, wires)
            self._flush(batch)

    def _unwrapped(
        self, batch: mmsg.DatagramBatch, wires: list[bytes], clients: dict[Any, Client]
    ) -> tuple[list[int], list[bytes], list[Client]]:
        """Through the PROXY v2 gate: the datagrams kept (their indices: replies go back to
        the balancer that sent them), their queries and their clients (the carried source)."""
        assert self._proxy is not None
        unwrap = self._proxy.unwrap
        indices, queries, whos = [], [], []
        for i, wire in enumerate(wires):
            host, port = batch.source(i)
            kept = unwrap(wire, host, port)
            if kept is None:
                continue  # dropped and counted by the gate
            indices.append(i)
            queries.append(kept[0])
            whos.append(clients.get(kept[1]) or new_client(clients, kept[1], kept[1]))
        return indices, queries, whos

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
            host = addr[0]
            if self._proxy is not None:
                kept = self._proxy.unwrap(data, host, addr[1])
                if kept is None:
                    continue  # dropped and counted by the gate
                data, host = kept[0], kept[1]
            client = clients.get(host) or new_client(clients, host, host)
            if self._divert(data, client, addr):
                continue
            sources = self._sources([addr])
            reply = self._outgoing(answer([data], [client], None, sources)[0], client, data)
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
