"""The clock that timers decide by: wall time, monotonic time and sleeping, in one object.

Components whose timers decide behaviour (the NOTIFY sender's retries and rounds, override
expiry, the probe scheduler, the failover watch) take a `Clock` instead of calling `time`
and `asyncio` themselves, so a test can hand them a clock it advances by hand
(tests/fake_clock.py) rather than sleeping for real.
The real one, `SYSTEM`, is `time.time`, `time.monotonic` and `asyncio.sleep`: behaviour
on it is exactly what it was without the seam. Components that only stamp times keep the
older, smaller style (`clock: Callable[[], float] = time.time`); pass `clock.time`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import Final, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (for stamps that leave the process)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for intervals and deadlines)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once `seconds` have passed on this clock."""
        ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM: Final = SystemClock()


async def within(clock: Clock, awaitable: Awaitable[T], seconds: float) -> T:
    """`awaitable`'s result, or TimeoutError (and `awaitable` cancelled) once `seconds` have
    passed on `clock`. On the real clock this is `asyncio.wait_for`."""
    if isinstance(clock, SystemClock):
        return await asyncio.wait_for(awaitable, seconds)
    work = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when we are cancelled: nothing is left running
        timer.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
    if work.cancelled():  # the timer won
        raise TimeoutError
    return work.result()
