"""Failover and failback events: the active pools compared when the health states or the
config changed, once per burst of changes.

The burst's delay, the events' times and the "now" steering is judged at run on a
`dnsd.clock.Clock` (tests advance a fake one instead of waiting for the check)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from dnsd.admin.active_pool_watch import ActivePoolWatch, RegionStates
from dnsd.admin.status import region_details_under
from dnsd.clock import SYSTEM, Clock
from dnsd.events import EventLog
from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView
from dnsd.snapshot import Snapshot, SnapshotHolder

MOVE_CHECK_DELAY_S = 0.05  # failover/failback events: one look per burst of changes


class FailoverWatch:
    def __init__(
        self, holder: SnapshotHolder, store: HealthStore, events: EventLog, clock: Clock = SYSTEM
    ) -> None:
        self.holder = holder
        self.store = store
        self.clock = clock

        def states(names: Iterable[str], snap: Snapshot, view: HealthView) -> RegionStates:
            return region_states(names, snap, view, clock.time())

        self.moves = ActivePoolWatch(
            states, lambda: holder.current, lambda: store.view, events, clock.time
        )
        self._watched: tuple[int, int] = (-1, -1)
        self._move_check: asyncio.Task[None] | None = None

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
        self._move_check = loop.create_task(self._check_soon())

    async def _check_soon(self) -> None:
        await self.clock.sleep(MOVE_CHECK_DELAY_S)
        self._move_check = None
        self._watched = (self.store.view.states_generation, self.holder.current.generation)
        self.moves.check()

    @property
    def settled(self) -> bool:
        """The last look saw the states and config served now, and none is pending or
        running (what a test waits for, rather than sleeping past the delay)."""
        key = (self.store.view.states_generation, self.holder.current.generation)
        return self._move_check is None and not self.moves.busy and self._watched == key

    def stop(self) -> None:
        if self._move_check is not None:
            self._move_check.cancel()


def region_states(
    names: Iterable[str], snap: Snapshot, view: HealthView, now: float
) -> RegionStates:
    """Per load balancer, the pool each client region gets under `snap` and `view` at
    `now`: the computation the status document and the metrics share (dnsd.admin.status)."""
    lbs = snap.config.load_balancers
    states = {}
    for name in names:
        active, failed, _ = region_details_under(snap, view, lbs[name], now)
        states[name] = (active, failed)
    return states
