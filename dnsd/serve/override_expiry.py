"""Overrides with an expiry end by themselves (the main process owns the overrides)."""

from __future__ import annotations

import asyncio
import contextlib

from dnsd.health.store import HealthStore, PersistError

OVERRIDE_EXPIRY_CHECK_S = 0.5


async def expire_overrides(store: HealthStore) -> None:
    """Overrides with an expiry end by themselves, also one set before a restart."""
    while True:
        with contextlib.suppress(PersistError):  # logged; the next tick tries again
            store.expire_overrides()
        await asyncio.sleep(OVERRIDE_EXPIRY_CHECK_S)
