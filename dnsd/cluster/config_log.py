"""The shared config history as a hash chain (docs/operations.md "Config sync: one sealed history").

Each change set is a record `{seq, prev, digest, origin, at, entries}` sealed with the
cluster key; `digest` is SHA-256 over everything else, `prev` the digest of the record
before it (GENESIS for the first). So the order of the changes is part of what is sealed:
nobody without the key can reorder, drop from the middle, renumber or replay records
without the chain breaking where every node sees it. A node's applied config is named by
the digest of the last record it applied.

`plan()` decides, purely, how a node with its own history meets the history in Redis: apply
what it lacks, put back what Redis lost (a Redis restarted empty or from an old snapshot is
re-seeded from the nodes' copies), re-append its own changes that Redis never kept after
what others wrote since, or — when the two share nothing — say that they diverged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dnsd.cluster.seal import canonical

GENESIS = "0" * 64


@dataclass(frozen=True, slots=True)
class Record:
    seq: int
    prev: str
    digest: str
    origin: str  # the node whose client made the change
    at: float
    entries: tuple[tuple[str, Any], ...]  # (route, body or None for a deletion)
    node: str  # the node that appended it (differs from origin after a re-append)

    def body(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "prev": self.prev,
            "digest": self.digest,
            "origin": self.origin,
            "at": self.at,
            "node": self.node,
            "entries": [{"route": r, "body": b} for r, b in self.entries],
        }


def digest_of(
    seq: int, prev: str, origin: str, at: float, entries: Sequence[tuple[str, Any]]
) -> str:
    text = canonical(
        {
            "seq": seq,
            "prev": prev,
            "origin": origin,
            "at": at,
            "entries": [[r, b] for r, b in entries],
        }
    )
    return hashlib.sha256(text.encode()).hexdigest()


def new_record(
    after: Record | None, node: str, origin: str, at: float, entries: Sequence[tuple[str, Any]]
) -> Record:
    seq = after.seq + 1 if after else 1
    prev = after.digest if after else GENESIS
    return Record(
        seq, prev, digest_of(seq, prev, origin, at, entries), origin, at, tuple(entries), node
    )


def record_of(body: dict[str, Any]) -> Record:
    """A record from an opened message; ValueError unless well formed and its digest holds."""
    seq, prev, digest = body.get("seq"), body.get("prev"), body.get("digest")
    origin, at, raw_entries = body.get("origin"), body.get("at"), body.get("entries")
    if not (
        isinstance(seq, int) and seq >= 1 and isinstance(prev, str) and isinstance(digest, str)
    ):
        raise ValueError("a config record needs seq, prev and digest")
    if not (
        isinstance(origin, str) and isinstance(at, int | float) and isinstance(raw_entries, list)
    ):
        raise ValueError("a config record needs origin, at and entries")
    entries = []
    for entry in raw_entries:
        route, value = entry.get("route"), entry.get("body")
        if not isinstance(route, str) or not (value is None or isinstance(value, dict)):
            raise ValueError("a config entry is a route and an object (or null)")
        entries.append((route, value))
    if digest_of(seq, prev, origin, at, entries) != digest:
        raise ValueError("a config record whose digest does not match its content")
    return Record(seq, prev, digest, origin, float(at), tuple(entries), str(body.get("node")))


def chain(records: Sequence[Record]) -> tuple[list[Record], list[Record]]:
    """(the chain that starts with the first record, the records that do not link into it)."""
    linked: list[Record] = []
    orphans: list[Record] = []
    for record in records:
        if not linked or (record.prev == linked[-1].digest and record.seq == linked[-1].seq + 1):
            linked.append(record)
        else:
            orphans.append(record)
    return linked, orphans


@dataclass(frozen=True, slots=True)
class Plan:
    apply: tuple[Record, ...] = ()  # shared records to apply here, in order
    append: tuple[Record, ...] = ()  # records of ours to add to Redis as they are
    reappend: tuple[Record, ...] = ()  # records of ours to add again after the shared tail
    diverged: str | None = None  # why this node cannot follow the shared history


def plan(history: Sequence[Record], shared: Sequence[Record]) -> Plan:
    """How a node whose applied history is `history` follows the chain `shared`."""
    head = history[-1].digest if history else GENESIS
    if not shared:
        return Plan(append=tuple(history))  # Redis lost everything: seed it from ours
    index = {r.digest: i for i, r in enumerate(shared)}
    if head in index:
        return Plan(apply=tuple(shared[index[head] + 1 :]))
    if head == GENESIS:
        if shared[0].prev == GENESIS:
            return Plan(apply=tuple(shared))
        return Plan(diverged="the shared history does not start at the beginning")
    # Our newest record is not in Redis: find the newest one we share.
    for k in range(len(history) - 1, -2, -1):
        ancestor = history[k].digest if k >= 0 else GENESIS
        if ancestor == GENESIS and shared[0].prev != GENESIS:
            break
        if ancestor != GENESIS and ancestor not in index:
            continue
        ours = tuple(history[k + 1 :])
        j = index[ancestor] if ancestor != GENESIS else -1
        if j == len(shared) - 1:
            return Plan(append=ours)  # Redis only lost our newest records: put them back
        # Others wrote after what we share: theirs, then ours again on top.
        return Plan(apply=tuple(shared[j + 1 :]), reappend=ours)
    return Plan(diverged="this node's history and the shared one have nothing in common")


def restorable(history: Sequence[Record], shared: Sequence[Record]) -> list[Record] | None:
    """The whole history, when the shared one lacks its start and ours holds it: our
    records up to the shared first, then the shared ones (they must agree where both
    have a record). None when ours cannot fill the gap."""
    at = {r.digest: i for i, r in enumerate(history)}
    k = at.get(shared[0].digest)
    if not k:  # not ours, or (impossible: ours starts at GENESIS) our first
        return None
    for j, record in enumerate(shared):
        if k + j < len(history) and history[k + j].digest != record.digest:
            return None  # the two fork after the gap: plan() says diverged
    return [*history[:k], *shared]
