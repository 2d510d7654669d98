"""Runs the probes: one task per (target, source), one probe in flight each, interval with
jitter, a bounded number of probes at once. Reconciled after every reload: new targets
start, removed ones stop, unchanged ones keep running (and keep their state)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from dnsd.clock import SYSTEM, Clock
from dnsd.config.model import Monitor
from dnsd.health.fsm import ProbeResult
from dnsd.health.probes import ProbeTarget, probe
from dnsd.health.store import HealthStore
from dnsd.ratelog import RateLimitedLog

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("dnsd.health.scheduler")
LOCAL_LOG = RateLimitedLog(log)


def next_delay(interval_s: float, elapsed_s: float, jitter: float, rng: random.Random) -> float:
    """Seconds until the next probe starts. Jitter only shortens an interval (interval ×
    [1 − jitter, 1]): the outage bound TTL + interval × unhealthy_threshold (+ one timeout,
    docs/health.md) must hold."""
    return max(0.0, interval_s * (1.0 - rng.uniform(0.0, jitter)) - elapsed_s)


class FairSlots:
    """A bounded number of probes at once, shared fairly between monitors (docs/health.md).

    A freed slot goes to the waiting monitor with the fewest probes in flight, and no monitor
    holds more than `share` of the slots while others could use them: a pool of hung backends
    (each holding a slot for a whole timeout) cannot make another pool's probes queue behind
    it. A waiter gives up after `timeout_s`, so waiting for a slot is part of the probe's
    timeout."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.share = size
        self.free = size
        self.busy: Counter[str] = Counter()
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}

    async def acquire(self, group: str, timeout_s: float) -> bool:
        """True with a slot held (give it back with `release`), False after `timeout_s`."""
        if not self._waiting and self.free > 0 and self.busy[group] < self.share:
            self._take(group)
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(group, deque()).append(waiter)
        self._grant()
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
            return True
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():  # granted as the timer fired
                self.release(group)
            else:
                self._forget(group, waiter)
            if isinstance(exc, TimeoutError):
                return False
            raise

    def set_groups(self, count: int) -> None:
        """How many monitors probe: with more than one, a quarter of the slots stays for the
        others (one monitor alone may use them all)."""
        self.share = self.size if count <= 1 else max(1, self.size - self.size // 4)
        self._grant()

    def release(self, group: str) -> None:
        self.busy[group] -= 1
        if self.busy[group] <= 0:
            del self.busy[group]
        self.free += 1
        self._grant()

    def _take(self, group: str) -> None:
        self.free -= 1
        self.busy[group] += 1

    def _forget(self, group: str, waiter: asyncio.Future[None]) -> None:
        queue = self._waiting.get(group)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[group]
        waiter.cancel()

    def _grant(self) -> None:
        while self.free > 0 and self._waiting:
            open_groups = [g for g in self._waiting if self.busy[g] < self.share]
            if not open_groups:  # only capped monitors wait: the rest is kept for others
                return
            group = min(open_groups, key=lambda g: self.busy[g])
            queue = self._waiting[group]
            waiter = queue.popleft()
            if not queue:
                del self._waiting[group]
            if waiter.done():
                continue
            self._take(group)
            waiter.set_result(None)


class ProbeScheduler:
    def __init__(
        self,
        store: HealthStore,
        max_concurrent: int = 256,
        jitter: float = 0.1,
        rng: random.Random | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        """`clock` decides the cadence (the first jitter, each interval, the wait after a
        probe): a test advances a fake one instead of sleeping through intervals."""
        self.store = store
        self.clock = clock
        self.jitter = jitter
        self.rng = rng or random.Random()
        self._slots = FairSlots(max_concurrent)
        self._tasks: dict[tuple[ProbeTarget, str], asyncio.Task[None]] = {}
        self._monitors: dict[tuple[ProbeTarget, str], Monitor] = {}
        self._session: aiohttp.ClientSession | None = None
        self.probes_total = 0
        self.on_probe: Callable[[ProbeTarget, str, ProbeResult], None] | None = None
        self.local_failures = 0  # probes that could not run on this machine
        self.slot_timeouts = 0  # probes that waited a whole timeout for a free slot
        self.first_round = asyncio.Event()
        self._pending_first: set[tuple[ProbeTarget, str]] = set()

    async def start(self) -> None:
        self.reconcile()

    def _client(self) -> aiohttp.ClientSession:
        """The one HTTP client, made at the first probe: the HTTP library (~15 MiB) is not
        loaded by a server that probes nothing."""
        if self._session is None:
            import aiohttp

            # A fresh connection per probe: a probe measures what a new client would see.
            connector = aiohttp.TCPConnector(force_close=True, limit=0)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    def reconcile(self) -> None:
        plan = self.store.probe_plan()
        for key in [k for k in self._tasks if k not in plan]:
            self._tasks.pop(key).cancel()
            self._monitors.pop(key, None)
            self._pending_first.discard(key)  # a removed target no longer holds readiness back
        self._monitors.update(plan)
        self._slots.set_groups(len({target.monitor for target, _ in plan}))
        for key in plan:
            if key not in self._tasks:
                self._pending_first.add(key)
                self._tasks[key] = asyncio.create_task(self._run(*key), name=f"probe {key}")
        if not self._pending_first:
            self.first_round.set()

    async def _run(self, target: ProbeTarget, source: str) -> None:
        key = (target, source)
        first = self._monitors[key]
        await self.clock.sleep(self.rng.uniform(0, min(first.interval_s * self.jitter, 0.25)))
        while True:
            monitor = self._monitors.get(key)
            if monitor is None:
                return
            started = self.clock.monotonic()
            # The timeout covers waiting for a slot too: a probe that cannot start within it
            # is a failed probe, like any other that takes longer than `timeout`.
            if await self._slots.acquire(target.monitor, monitor.timeout_s):
                try:
                    left = monitor.timeout_s - (self.clock.monotonic() - started)
                    result = await probe(self._client(), target, monitor, source, left)
                finally:
                    self._slots.release(target.monitor)
            else:
                self.slot_timeouts += 1
                error = f"timeout after {monitor.timeout_s:g}s (no free probe slot)"
                result = ProbeResult(False, self.clock.time(), None, error)
            self.probes_total += 1
            if result.local:  # this machine's trouble, not the backend's: no verdict
                self.local_failures += 1
                LOCAL_LOG.log(
                    self.clock.time(),
                    logging.ERROR,
                    "probe of %s:%d could not run here (%s): no result",
                    target.host,
                    target.port,
                    result.error,
                )
            else:
                self.store.record(target, source, result, monitor)
            if self.on_probe is not None:
                self.on_probe(target, source, result)
            if key in self._pending_first:
                self._pending_first.discard(key)
                if not self._pending_first:
                    self.first_round.set()
            elapsed = self.clock.monotonic() - started
            await self.clock.sleep(next_delay(monitor.interval_s, elapsed, self.jitter, self.rng))

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        if self._session is not None:
            await self._session.close()
