"""Failover and failback events: the active pools compared when the health states or the
config changed, once per burst of changes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from dnsd.admin.active_pool_watch import ActivePoolWatch, RegionStates
from dnsd.admin.status import region_details_under
from dnsd.events import EventLog
from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView
from dnsd.snapshot import Snapshot, SnapshotHolder

MOVE_CHECK_DELAY_S = 0.05  # failover/failback events: one look per burst of changes


class FailoverWatch:
    def __init__(self, holder: SnapshotHolder, store: HealthStore, events: EventLog) -> None:
        self.holder = holder
        self.store = store
        self.moves = ActivePoolWatch(
            region_states, lambda: holder.current, lambda: store.view, events
        )
        self._watched: tuple[int, int] = (-1, -1)
        self._move_check: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        self.moves.arm()  # the starting point failovers are measured from

    def on_view(self, view: HealthView) -> None:
        """Looked at when the health *states* or the config changed (RTT-only views move
        no failover order)."""
        key = (view.states_generation, self.holder.current.generation)
        if key == self._watched or self._move_check is not None:
            return
        self._watched = key
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a test driving the store): at once
            self.moves.check()
            return
        # A little later, once for a burst of changes (a flapping pool, a script writing
        # overrides): steering every load balancer again per change would be most of what
        # a change costs the event loop.
        self._move_check = loop.call_later(MOVE_CHECK_DELAY_S, self._check)

    def _check(self) -> None:
        self._move_check = None
        self._watched = (self.store.view.states_generation, self.holder.current.generation)
        self.moves.check()

    def stop(self) -> None:
        if self._move_check is not None:
            self._move_check.cancel()


def region_states(names: Iterable[str], snap: Snapshot, view: HealthView) -> RegionStates:
    """Per load balancer, the pool each client region gets under `snap` and `view`:
    the computation the status document and the metrics share (dnsd.admin.status)."""
    now, lbs = time.time(), snap.config.load_balancers
    states = {}
    for name in names:
        active, failed, _ = region_details_under(snap, view, lbs[name], now)
        states[name] = (active, failed)
    return states
