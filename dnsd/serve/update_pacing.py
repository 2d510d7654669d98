"""The share of the interpreter a burst of UPDATEs takes from the serving loops.

Each UPDATE costs about half a millisecond of Python on the event loop (dnspython parsing
it and checking its TSIG, the decision, the signed answer), and a serving loop needs the
GIL for every batch of cached answers it sends. Handing the GIL on every 0.2 ms is not
enough on a busy machine: the thread holding it is descheduled by the OS while it holds
it, and the serving loop waits a whole time slice of another process (measured: cached
answers' p99 at 16-30 ms during a burst, 3-12 ms before it, at load 10 on 2 cores).
So a burst works in turns: after WORK_S of UPDATE work the event loop rests, idle with
the GIL free, REST_PER_WORK times as long. An UPDATE alone is never delayed; a burst of
1,000 is applied in about three times the CPU time it needs.
"""

from __future__ import annotations

import asyncio
from typing import Final

from dnsd.clock import SYSTEM, Clock

WORK_S: Final = 0.001  # UPDATE work in one turn
REST_PER_WORK: Final = 2.0  # the rest after a turn, per second of work in it


class Pacer:
    def __init__(self, clock: Clock = SYSTEM) -> None:
        self._clock = clock.monotonic  # work measured on it, rests slept on it
        self._sleep = clock.sleep
        self._lock = asyncio.Lock()  # the UPDATEs waiting for their turn, in order
        self._used = 0.0  # work since the last rest
        self._last = 0.0  # when the last work ended

    async def turn(self) -> None:
        """Wait, if the turn's work is spent, for the rest that follows it."""
        async with self._lock:
            if self._clock() - self._last > self._used * REST_PER_WORK:
                self._used = 0.0  # rested already: nothing else was waiting
            if self._used >= WORK_S:
                await self._sleep(self._used * REST_PER_WORK)
                self._used = 0.0

    def timed(self) -> _Timed:
        """`with pacer.timed():` around UPDATE work counts it in the turn."""
        return _Timed(self)


class _Timed:
    def __init__(self, pacer: Pacer) -> None:
        self._pacer = pacer
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = self._pacer._clock()

    def __exit__(self, *_exc: object) -> None:
        now = self._pacer._clock()
        self._pacer._used += now - self._started
        self._pacer._last = now
