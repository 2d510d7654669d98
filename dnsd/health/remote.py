"""Other nodes' observations (docs/health.md, several nodes), and how long they count.

An observation shared through Redis counts while it is younger than `max_age_s`; while
the bus is down the last shared state is kept (`frozen`), since no news is not bad news.
"""

from __future__ import annotations

from dataclasses import dataclass

from dnsd.health.fsm import State
from dnsd.health.probes import ProbeTarget
from dnsd.health.view import RttSample


@dataclass(frozen=True, slots=True)
class RemoteObservation:
    state: State
    rtt: RttSample | None
    published_at: float


MAX_OBSERVATIONS = 100_000  # (target, source) pairs remembered; least recently heard go first
Key = tuple[ProbeTarget, str]  # (what is probed, the source region it was probed from)


class RemoteObservations:
    """(target, source) → the newest observation another node shared, and which count."""

    def __init__(self, max_age_s: float = 30.0) -> None:
        self.max_age_s = max_age_s
        self.frozen = False  # True while the bus is down: nothing expires
        self._seen: dict[Key, RemoteObservation] = {}
        self._fresh: set[Key] = set()

    def add(self, key: Key, observation: RemoteObservation, now: float) -> bool:
        """Remember it; True when it changes what counts (a new state, or the key counting
        again after it had expired)."""
        previous = self._seen.pop(key, None)  # re-inserted last: the table is in LRU order
        was_fresh = key in self._fresh
        self._seen[key] = observation
        while len(self._seen) > MAX_OBSERVATIONS:
            oldest = next(iter(self._seen))
            del self._seen[oldest]
            self._fresh.discard(oldest)
        if self.frozen or now - observation.published_at <= self.max_age_s:
            self._fresh.add(key)
        return previous is None or previous.state != observation.state or not was_fresh

    def last_published(self, key: Key) -> float | None:
        """When the newest observation of `key` was published (replays are older)."""
        seen = self._seen.get(key)
        return seen.published_at if seen is not None else None

    def previous_state(self, key: Key) -> State | None:
        seen = self._seen.get(key)
        return seen.state if seen is not None else None

    def current(self, key: Key) -> RemoteObservation | None:
        """The observation when it still counts."""
        return self._seen.get(key) if key in self._fresh else None

    def stale(self, key: Key) -> RemoteObservation | None:
        """The last observation of a source that no longer counts (docs/health.md, stale
        sources): kept for display, it does not vote."""
        return self._seen.get(key) if key not in self._fresh else None

    def expire(self, now: float) -> int:
        """Stop counting observations older than max_age_s (not while frozen): how many."""
        if self.frozen:
            return 0
        stale = {k for k in self._fresh if now - self._seen[k].published_at > self.max_age_s}
        self._fresh -= stale
        return len(stale)

    def keep_only(self, targets: set[ProbeTarget]) -> None:
        """Forget observations of targets the config no longer has."""
        for key in [k for k in self._seen if k[0] not in targets]:
            del self._seen[key]
            self._fresh.discard(key)
