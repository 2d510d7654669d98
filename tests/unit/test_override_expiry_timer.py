"""The override expiry timer on a FakeClock: an override with an expiry ends within one
check interval after it, not before, and the timer keeps checking after it did."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dnsd.health.overrides import OverrideMeta
from dnsd.health.store import HealthStore
from dnsd.loading import load_snapshot
from dnsd.serve.override_expiry import OVERRIDE_EXPIRY_CHECK_S, expire_overrides
from tests.fake_clock import FakeClock
from tests.integration.test_health_server import OVERRIDE_CONFIG


def test_an_override_ends_within_a_check_interval_after_its_expiry(tmp_path: Path) -> None:
    (tmp_path / "h.yaml").write_text(OVERRIDE_CONFIG)
    clock = FakeClock()
    store = HealthStore(clock=clock.time)
    store.set_snapshot(load_snapshot(tmp_path, 1))

    async def run() -> None:
        timer = asyncio.create_task(expire_overrides(store, clock))
        for expires_in in (2.0, 30.0):  # one after the other: the timer keeps checking
            meta = OverrideMeta("test", "drill", clock.now, clock.now + expires_in)
            store.set_pool_override("first", "down", meta)
            await clock.advance(expires_in - 0.01)
            assert store.overrides.pools == {"first": "down"}  # not before its expiry
            await clock.advance(0.01 + OVERRIDE_EXPIRY_CHECK_S)
            assert store.overrides.pools == {}  # within one check after it
        timer.cancel()

    asyncio.run(run())
    expired = [e for e in store.events if e.cause == "override expired"]
    assert len(expired) == 2
