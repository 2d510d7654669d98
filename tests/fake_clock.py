"""A clock that moves only when the test says so (dnsd.clock.Clock).

`await clock.advance(s)` moves time forward, waking every sleeper whose time has come in
the order of their deadlines and letting the event loop run what they started, so a test
of a 1 s retry takes no second. What happens outside the loop (a real socket's answer, a
thread) still takes real time: wait for it with tests.waiting.until_async."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeClock:
    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start  # both clocks: a wall time far from 0, and monotonic with it
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), woken))
        await woken  # cancelled with the sleeper; advance() skips cancelled ones

    @property
    def sleepers(self) -> int:
        """Sleepers not woken yet."""
        return sum(1 for _, _, woken in self._sleepers if not woken.done())

    async def settle(self) -> None:
        """Let the loop run what is ready (callbacks, tasks woken, their next steps)."""
        for _ in range(20):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move `seconds` forward, waking sleepers deadline by deadline."""
        target = self.now + seconds
        await self.settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, woken = heapq.heappop(self._sleepers)
            self.now = max(self.now, deadline)
            if not woken.done():
                woken.set_result(None)
                await self.settle()
        self.now = target
        await self.settle()
