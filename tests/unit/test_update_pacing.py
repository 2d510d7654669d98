"""A burst of UPDATEs works in turns: after WORK_S of work the event loop rests; an UPDATE
alone, or after a rest as long as its work, waits for nothing."""

from __future__ import annotations

import asyncio
import time

from dnsd.serve.update_pacing import REST_PER_WORK, WORK_S, Pacer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_work_within_a_turn_waits_for_nothing_and_a_spent_turn_rests() -> None:
    async def run() -> tuple[float, float]:
        clock = Clock()
        pacer = Pacer(clock)
        started = time.perf_counter()
        await pacer.turn()
        with pacer.timed():
            clock.now += WORK_S / 2
        await pacer.turn()  # half a turn spent: no rest
        unpaced = time.perf_counter() - started
        with pacer.timed():
            clock.now += WORK_S * 5  # the turn spent, five times over
        started = time.perf_counter()
        await pacer.turn()
        return unpaced, time.perf_counter() - started

    unpaced, rested = asyncio.run(run())
    assert unpaced < WORK_S
    assert rested >= WORK_S * 5.5 * REST_PER_WORK * 0.9


def test_work_after_a_long_enough_pause_is_not_made_to_rest() -> None:
    async def run() -> float:
        clock = Clock()
        pacer = Pacer(clock)
        with pacer.timed():
            clock.now += WORK_S * 5
        clock.now += WORK_S * 5 * REST_PER_WORK + 0.001  # nothing came for that long
        started = time.perf_counter()
        await pacer.turn()
        return time.perf_counter() - started

    assert asyncio.run(run()) < WORK_S * 5 * REST_PER_WORK
