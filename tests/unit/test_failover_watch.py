"""The failover watch on a FakeClock: a burst of changes is one look at the active pools,
MOVE_CHECK_DELAY_S after the first of them and not before; its events carry the clock's
time, each change of the burst compared from the state the one before left."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dnsd.health.overrides import OverrideMeta
from dnsd.health.store import HealthStore
from dnsd.loading import load_snapshot
from dnsd.serve.failover_watch import MOVE_CHECK_DELAY_S, FailoverWatch
from dnsd.snapshot import SnapshotHolder
from tests.fake_clock import FakeClock
from tests.integration.test_health_server import OVERRIDE_CONFIG

MOVES = ("failover", "failback", "fail_open")


def test_a_burst_of_changes_is_one_look_after_the_delay(tmp_path: Path) -> None:
    (tmp_path / "h.yaml").write_text(OVERRIDE_CONFIG)  # www: first, then second
    clock = FakeClock()
    snap = load_snapshot(tmp_path, 1)
    store = HealthStore(clock=clock.time)
    store.set_snapshot(snap)
    watch = FailoverWatch(SnapshotHolder(snap), store, store.events, clock)
    store.view_listeners.append(watch.on_view)

    def moved() -> list[tuple[str, str | None, str | None, float, str]]:
        return [(e.kind, e.lb, e.pool, e.time, e.cause) for e in store.events if e.kind in MOVES]

    async def run() -> None:
        watch.arm()
        meta = OverrideMeta("alice", "drill", clock.now)
        # one burst: first down, second down, second back
        store.set_pool_override("first", "down", meta)
        store.set_pool_override("second", "down", meta)
        await clock.advance(MOVE_CHECK_DELAY_S / 2)
        store.set_pool_override("second", None, meta)
        await clock.advance(MOVE_CHECK_DELAY_S / 2 - 0.001)
        assert moved() == []  # not before the delay
        await clock.advance(0.001)
        at = clock.now
        # one look: the overrides set (both pools down: fail open on the first), then the
        # one removed (the second answers), each with its own cause
        assert moved() == [
            ("failover", "www", "first", at, "override"),
            ("fail_open", "www", "first", at, "override"),
            ("failover", "www", "second", at, "override removed"),
        ]
        await clock.advance(10 * MOVE_CHECK_DELAY_S)
        assert len(moved()) == 3  # nothing more without a change
        store.set_pool_override("first", None, meta)
        await clock.advance(MOVE_CHECK_DELAY_S)
        at += 11 * MOVE_CHECK_DELAY_S
        assert moved()[3:] == [("failback", "www", "first", at, "override removed")]
        watch.stop()

    asyncio.run(run())
