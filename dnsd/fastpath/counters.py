"""The counters the answer tables index: answers per reply (dnsd.reply.count_key; the
compiled loop bumps them), per (load balancer, pool, region) and fallback answers per load
balancer. A scrape reads them under the lock; when the index grows past its bound the
counts are folded and the index starts again (every table is gone by then)."""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable
from typing import Any

MAX_COUNTERS = 65536  # distinct counters the tables index (then counted and started again)


class AnswerCounters:
    def __init__(self) -> None:
        self.values = array("q")  # by index: what the tables' leaves bump
        self.keys: list[tuple[str, Any]] = []  # by index: (kind, key)
        self._ids: dict[tuple[str, Any], int] = {}
        self.lock = threading.Lock()
        self.folded: dict[str, dict[Any, int]] = {"lb": {}, "fallback": {}}
        self._tally: Any = None  # where reply counts go (DnsServer's tally of this loop)
        # dnstap in the compiled loop: per counter, the dnstap `policy` field an "lb"
        # counter's answers carry (b"" for the others), made by `encode_policy` when set.
        self.encode_policy: Callable[[tuple[str, str, str]], bytes] | None = None
        self.policies: list[bytes] = []
        # the compiled loop's answers from the zone tables by count key (it writes them)
        self.zone_counts: dict[bytes, int] = {}

    def index(self, kind: str, key: Any) -> int:
        """The index of a counter (registered on first use)."""
        index = self._ids.get((kind, key))
        if index is None:
            index = self._ids[(kind, key)] = len(self.keys)
            encode = self.encode_policy if kind == "lb" else None
            with self.lock:
                self.keys.append((kind, key))
                self.values.append(0)
                self.policies.append(encode(key) if encode is not None else b"")
        return index

    def full(self) -> bool:
        return len(self.keys) > MAX_COUNTERS

    def count_replies_into(self, tally: Any) -> None:
        """The compiled loop's answers are counted in `tally` (dnsd.tally.Tally:
        `count_also`, `absorb`) under their reply's count_key, as its Python path counts."""
        if self._tally is tally:  # a restarted loop asks again: counted once
            return
        self._tally = tally
        tally.count_also(self._reply_counts)

    def _reply_counts(self) -> list[tuple[bytes, int]]:
        with self.lock:
            replies = [
                (key, n)
                for (kind, key), n in zip(self.keys, self.values, strict=True)
                if kind == "reply" and n
            ]
            return replies + list(self.zone_counts.items())

    def counted(self, kind: str, more: Callable[[dict[Any, int]], None]) -> dict[Any, int]:
        """The counts of one kind ("lb", "fallback"): folded and current; `more` adds the
        class tables' under the same lock."""
        with self.lock:
            out = dict(self.folded[kind])
            more(out)
            for (counted_kind, key), n in zip(self.keys, self.values, strict=True):
                if counted_kind == kind and n:
                    out[key] = out.get(key, 0) + n
        return out

    def restart(self) -> None:
        """Fold the counts and start the index again (every table is gone by now)."""

        def take() -> list[tuple[bytes, int]]:
            with self.lock:
                replies = []
                for (kind, key), n in zip(self.keys, self.values, strict=True):
                    if kind == "reply":
                        replies.append((key, n))
                    elif n:
                        self.folded[kind][key] = self.folded[kind].get(key, 0) + n
                self._ids, self.keys = {}, []
                self.values = array("q")
                self.policies = []
            return replies

        if self._tally is not None:
            self._tally.absorb(take)
        else:
            take()
