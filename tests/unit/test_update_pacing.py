"""A burst of UPDATEs works in turns: after WORK_S of work the event loop rests; an UPDATE
alone, or after a rest as long as its work, waits for nothing. The pacer's clock is the
test's (tests/fake_clock.py): work and rests take no real time."""

from __future__ import annotations

import asyncio

from dnsd.serve.update_pacing import REST_PER_WORK, WORK_S, Pacer
from tests.fake_clock import FakeClock


def test_work_within_a_turn_waits_for_nothing_and_a_spent_turn_rests() -> None:
    async def run() -> None:
        clock = FakeClock()
        pacer = Pacer(clock)
        await pacer.turn()
        with pacer.timed():
            clock.now += WORK_S / 2
        turn = asyncio.ensure_future(pacer.turn())  # half a turn spent: no rest
        await clock.settle()
        assert turn.done() and not clock.sleepers
        with pacer.timed():
            clock.now += WORK_S * 5  # the turn spent, five times over
        turn = asyncio.ensure_future(pacer.turn())
        await clock.settle()
        assert not turn.done() and clock.sleepers == 1
        rest = WORK_S * 5.5 * REST_PER_WORK  # the whole turn's work, times REST_PER_WORK
        await clock.advance(rest * 0.99)
        assert not turn.done()
        await clock.advance(rest * 0.02)
        assert turn.done()

    asyncio.run(run())


def test_work_after_a_long_enough_pause_is_not_made_to_rest() -> None:
    async def run() -> None:
        clock = FakeClock()
        pacer = Pacer(clock)
        with pacer.timed():
            clock.now += WORK_S * 5
        clock.now += WORK_S * 5 * REST_PER_WORK + 0.001  # nothing came for that long
        turn = asyncio.ensure_future(pacer.turn())
        await clock.settle()
        assert turn.done() and not clock.sleepers

    asyncio.run(run())
