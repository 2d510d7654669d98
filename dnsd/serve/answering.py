"""The answering functions the serving loops call: one per loop (a UDP thread, or the event
loop's UDP or TCP), each with its own answer cache and metrics tally, everything bound once."""

from __future__ import annotations

import logging
import random
import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from dnsd.admin.metrics import Metrics
from dnsd.fastpath import AnswerCache
from dnsd.health.view import HealthView
from dnsd.net.dnstap import DnstapWriter
from dnsd.net.udp import Answerer, Source
from dnsd.net.udp_thread import BatchAnswerer, CacheHits
from dnsd.ratelog import RateLimitedLog
from dnsd.reply import Client, count_key
from dnsd.request import DecisionObserver, Request
from dnsd.resolve import resolve
from dnsd.snapshot import Snapshot, SnapshotHolder

log = logging.getLogger("dnsd.server")  # one logger for every part of serving
ERROR_LOG = RateLimitedLog(log)  # per-query errors: a bounded amount of log


class Answering:
    def __init__(
        self,
        holder: SnapshotHolder,
        view: Callable[[], HealthView],
        metrics: Metrics,
        rng: random.Random,
        query_log_sample: float,
        tap: DnstapWriter | None = None,
    ) -> None:
        self.holder = holder
        self.view = view  # the store's, or in a worker the main process's last
        self.metrics = metrics
        self.rng = rng
        self.query_log_sample = query_log_sample  # share of queries logged
        self.tap = tap  # dnstap: the serving loops then pass each query's addresses
        self._noted: dict[int, list[Any]] = {}

    def answerer(self, cache: AnswerCache | None, transport: str) -> Answerer:
        """One query at a time (TCP, the event loop's UDP): a batch of one."""
        answer_batch = self.batch_answerer(cache, transport)

        def answer_query(wire: bytes, client: Client, source: Source | None = None) -> bytes | None:
            return answer_batch([wire], [client], None, None if source is None else [source])[0]

        return answer_query

    def batch_answerer(self, cache: AnswerCache | None, transport: str) -> BatchAnswerer:
        return self.answering(cache, transport)[0]

    def answering(
        self, cache: AnswerCache | None, transport: str
    ) -> tuple[BatchAnswerer, CacheHits | None]:
        """The answering function of one loop, for a batch of queries: its own cache and
        metrics tally, everything bound once. The clock, the snapshot and the health view
        are read once per batch, the time taken is measured per batch (each query counts the
        batch's mean in the latency histogram), and the tally's updates are written out
        here: no call per query but the cache's. Second: what the compiled UDP loop needs to
        answer the cache's hits itself, with the same cache, random source and tally (None:
        every query takes this function)."""

        def uncached(
            wire: bytes,
            client: Client,
            snap: Snapshot,
            view: HealthView,
            rng: random.Random,
            now: float,
            decided: DecisionObserver,
        ) -> bytes | None:
            return resolve(Request(wire, client, snap, view, rng, now, decided))

        # The cache takes the request's parts as they are: a memo hit builds no object.
        answer = cache.answer if cache is not None else uncached
        if cache is not None:
            self.metrics.count_decisions_of(cache.lb_counts, cache.fallback_counts)
        tally = self.metrics.tally(transport)
        counts, latency, sums, dropped = tally.counts, tally.latency, tally.sums, tally.dropped
        buckets, fold_at, fold = tally.buckets, tally.fold_at, tally.fold
        decided = self.metrics.observe_decision
        holder, rng, current_view = self.holder, self.rng, self.view
        sample = self.query_log_sample
        perf_counter, wall_clock = time.perf_counter, time.time

        def record(answered: int, queries: int, seconds: float) -> None:
            """`answered` of `queries` answered in `seconds`: the mean into the histogram."""
            if answered:
                latency[bisect_left(buckets, seconds / queries)] += answered
                sums[0] += seconds * answered / queries
            if len(counts) > fold_at:  # random names: fold into labelled totals
                fold()

        tap = self.tap
        # The decision of the query being answered (dnstap). One per cache: the event
        # loop's UDP and TCP share a cache (and the thread), so they share where it goes.
        noted: list[Any] = [None] if cache is None else self._noted.setdefault(id(cache), [None])

        def note(decision: tuple[str, str, str]) -> None:
            noted[0] = decision

        def decided_and_noted(lb: str, pool: str | None, region: str | None, fail: bool) -> None:
            noted[0] = (lb, pool or "-", region or "-")
            decided(lb, pool, region, fail)

        observe = decided if tap is None else decided_and_noted
        if tap is not None and cache is not None:
            cache.note = note
            cache.counts.encode_policy = tap.policy_field  # for the compiled loop's frames

        def answer_batch(
            wires: list[bytes],
            clients: list[Client],
            drawn: list[Any] | None = None,
            sources: list[Source] | None = None,
        ) -> list[bytes | None]:
            if tap is not None and sources is not None:
                return tapped_batch(wires, clients, drawn, sources)
            started = perf_counter()
            snap, view, now = holder.current, current_view(), wall_clock()
            replies: list[bytes | None] = []
            for i, (wire, client) in enumerate(zip(wires, clients, strict=True)):
                try:
                    if drawn is not None and drawn[i] is not None:  # the compiled loop drew
                        assert cache is not None
                        reply = cache.answer(wire, client, snap, view, rng, now, observe, drawn[i])
                    else:
                        reply = answer(wire, client, snap, view, rng, now, observe)
                except Exception:  # a bug must cost one answer, never the listener
                    ERROR_LOG.log(
                        now,
                        logging.ERROR,
                        "error answering a query from %s",
                        client.address,
                        exc_info=True,
                    )
                    reply = None
                replies.append(reply)
                if reply is None:
                    dropped[0] += 1
                    continue
                key = count_key(reply)  # flags, rcode and the question's type
                counts[key] = counts.get(key, 0) + 1
            record(len(replies) - replies.count(None), len(replies), perf_counter() - started)
            if sample:
                for client, reply in zip(clients, replies, strict=True):
                    if reply and rng.random() < sample:
                        log_query(client, reply)
            return replies

        def tapped_batch(
            wires: list[bytes],
            clients: list[Client],
            drawn: list[Any] | None,
            sources: list[Source],
        ) -> list[bytes | None]:
            """dnstap: each query answered on its own, its decision noted, and handed to
            the writer's queue with its addresses and times (the writer encodes)."""
            assert tap is not None
            replies: list[bytes | None] = []
            now = wall_clock()
            for i, (wire, client) in enumerate(zip(wires, clients, strict=True)):
                if not tap.sampled():
                    replies.extend(answer_batch([wire], [client], drawn and drawn[i : i + 1]))
                    continue
                noted[0] = None
                reply = answer_batch([wire], [client], drawn and drawn[i : i + 1])[0]
                replies.append(reply)
                if wire:
                    port, server, server_port = sources[i]
                    tap.put(
                        (
                            wire,
                            reply,
                            client.address,
                            port,
                            server,
                            server_port,
                            client.transport,
                            now,
                            wall_clock(),
                            noted[0],
                        )
                    )
            return replies

        hits = None
        if cache is not None and not sample:  # the query log sees every reply
            hits = CacheHits(
                cache,
                rng,
                tally,
                lambda: cache.prepare(holder.current, current_view(), wall_clock()),
                record,
                tap,
            )
        return answer_batch, hits


def log_query(client: Client, reply: bytes) -> None:
    from dnslib import QTYPE, RCODE, DNSRecord

    try:
        parsed = DNSRecord.parse(reply)
    except Exception:  # a sampled log line must never break serving
        return
    log.info(
        "query %s %s from %s: %s %s",
        parsed.q.qname,
        QTYPE.get(parsed.q.qtype),
        client.address,
        RCODE.get(parsed.header.rcode),
        " ".join(str(rr.rdata) for rr in parsed.rr),
        extra={
            "event": "query",
            "qname": str(parsed.q.qname),
            "qtype": QTYPE.get(parsed.q.qtype),
            "client": str(client.address),
            "transport": client.transport,
            "rcode": RCODE.get(parsed.header.rcode),
            "answer": [str(rr.rdata) for rr in parsed.rr],
        },
    )
