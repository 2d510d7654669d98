"""Overrides with an expiry end by themselves (the main process owns the overrides)."""

from __future__ import annotations

import contextlib

from dnsd.clock import SYSTEM, Clock
from dnsd.health.store import HealthStore, PersistError

OVERRIDE_EXPIRY_CHECK_S = 0.5


async def expire_overrides(store: HealthStore, clock: Clock = SYSTEM) -> None:
    """Overrides with an expiry end by themselves, also one set before a restart. Whether
    one has expired is judged on the store's clock (a cluster's common time); `clock` only
    paces the checks."""
    while True:
        with contextlib.suppress(PersistError):  # logged; the next tick tries again
            store.expire_overrides()
        await clock.sleep(OVERRIDE_EXPIRY_CHECK_S)
