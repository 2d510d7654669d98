"""The serving tally: what one answering loop counts per query, written on the hot path
(dnsd.serve.answering inlines the updates; the compiled loop's counters are read through
`count_also`). dnsd.admin.metrics renders it; nothing here knows Prometheus."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from dnslib import QTYPE, RCODE

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5)
KNOWN_QTYPES = frozenset(
    {"A", "AAAA", "CNAME", "MX", "TXT", "NS", "SOA", "SRV", "CAA", "PTR", "ANY", "DS", "HTTPS"}
)

FOLD_AT = 50_000


class Tally:
    """Query counts of one answering loop, keyed by dnsd.reply.count_key (flags, rcode,
    question type), and its answer-latency histogram. Only that loop writes them (see
    dnsd.serve.answering: the updates are inlined there); a scrape reads a copy. Folding into
    labelled totals happens under a lock so a scrape never sees a count twice or not at all."""

    buckets = LATENCY_BUCKETS
    fold_at = FOLD_AT

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.counts: dict[bytes, int] = {}
        self.folded: dict[tuple[str, str, str], int] = {}
        self.latency = [0] * (len(LATENCY_BUCKETS) + 1)
        self.sums = [0.0]
        self.dropped = [0]
        self._lock = threading.Lock()
        # Counts kept elsewhere under the same keys (the compiled loop's answer-table
        # counters, dnsd.fastpath): read with these, under this lock.
        self._sources: list[Callable[[], list[tuple[bytes, int]]]] = []

    def count_also(self, source: Callable[[], list[tuple[bytes, int]]]) -> None:
        self._sources.append(source)

    def absorb(self, take: Callable[[], list[tuple[bytes, int]]]) -> None:
        """Move what `take` returns (counts a source gives up) into this tally at once: a
        scrape sees them there or in the source, never in both or neither."""
        with self._lock:
            counts = self.counts
            for key, n in take():
                counts[key] = counts.get(key, 0) + n

    def fold(self) -> None:
        with self._lock:
            self._add(self.folded, list(self.counts.items()))
            self.counts.clear()

    def totals(self) -> dict[tuple[str, str, str], int]:
        with self._lock:
            totals = dict(self.folded)
            self._add(totals, list(self.counts.items()))  # list(): one step under the GIL
            for source in self._sources:
                self._add(totals, source())
        return totals

    def _add(self, into: dict[tuple[str, str, str], int], items: list[tuple[bytes, int]]) -> None:
        for key, count in items:
            label = (
                qtype_of(key),  # dnsd.reply.count_key: flags, rcode, qtype
                RCODE.get(key[1] & 0x0F, "OTHER"),
                self.transport,
            )
            into[label] = into.get(label, 0) + count


def qtype_of(key: bytes) -> str:
    """The question type in a count key (dnsd.reply.count_key): NONE without a question."""
    if len(key) < 4:
        return "NONE"
    name = QTYPE.get(struct.unpack_from("!H", key, 2)[0], "OTHER")
    return name if name in KNOWN_QTYPES else "OTHER"


class CountsView(Mapping[Any, int]):
    """An answer cache's counts of one kind ("lb", "fallback") as a mapping, read afresh
    each time (what the metrics read): `counted(kind)` folded and current."""

    def __init__(self, counted: Callable[[str], dict[Any, int]], kind: str) -> None:
        self._counted, self._kind = counted, kind

    def _now(self) -> dict[Any, int]:
        return self._counted(self._kind)

    def __getitem__(self, key: Any) -> int:
        return self._now()[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())

    def items(self) -> Any:
        return self._now().items()

    def values(self) -> Any:
        return self._now().values()
