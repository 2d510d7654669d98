"""Runs the probes: one task per (target, source), one probe in flight each, interval with
jitter, a bounded number of probes at once. Reconciled after every reload: new targets
start, removed ones stop, unchanged ones keep running (and keep their state)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

import aiohttp

from dnsd.config.model import Monitor
from dnsd.health.fsm import ProbeResult
from dnsd.health.probes import ProbeTarget, probe
from dnsd.health.store import HealthStore
from dnsd.ratelog import RateLimitedLog

log = logging.getLogger("dnsd.health.scheduler")
LOCAL_LOG = RateLimitedLog(log)


def next_delay(interval_s: float, elapsed_s: float, jitter: float, rng: random.Random) -> float:
    """Seconds until the next probe starts. Jitter only shortens an interval (interval ×
    [1 − jitter, 1]): the outage bound TTL + interval × unhealthy_threshold (+ one timeout,
    docs/health.md) must hold."""
    return max(0.0, interval_s * (1.0 - rng.uniform(0.0, jitter)) - elapsed_s)


class ProbeScheduler:
    def __init__(
        self,
        store: HealthStore,
        max_concurrent: int = 256,
        jitter: float = 0.1,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.jitter = jitter
        self.rng = rng or random.Random()
        self._limit = asyncio.Semaphore(max_concurrent)
        self._tasks: dict[tuple[ProbeTarget, str], asyncio.Task[None]] = {}
        self._monitors: dict[tuple[ProbeTarget, str], Monitor] = {}
        self._session: aiohttp.ClientSession | None = None
        self.probes_total = 0
        self.on_probe: Callable[[ProbeTarget, str, ProbeResult], None] | None = None
        self.local_failures = 0  # probes that could not run on this machine
        self.first_round = asyncio.Event()
        self._pending_first: set[tuple[ProbeTarget, str]] = set()

    async def start(self) -> None:
        # A fresh connection per probe: a probe measures what a new client would see.
        connector = aiohttp.TCPConnector(force_close=True, limit=0)
        self._session = aiohttp.ClientSession(connector=connector)
        self.reconcile()

    def reconcile(self) -> None:
        plan = self.store.probe_plan()
        for key in [k for k in self._tasks if k not in plan]:
            self._tasks.pop(key).cancel()
            self._monitors.pop(key, None)
            self._pending_first.discard(key)  # a removed target no longer holds readiness back
        self._monitors.update(plan)
        for key in plan:
            if key not in self._tasks:
                self._pending_first.add(key)
                self._tasks[key] = asyncio.create_task(self._run(*key), name=f"probe {key}")
        if not self._pending_first:
            self.first_round.set()

    async def _run(self, target: ProbeTarget, source: str) -> None:
        key = (target, source)
        first = self._monitors[key]
        await asyncio.sleep(self.rng.uniform(0, min(first.interval_s * self.jitter, 0.25)))
        while True:
            monitor = self._monitors.get(key)
            if monitor is None:
                return
            started = time.monotonic()
            assert self._session is not None
            async with self._limit:
                result = await probe(self._session, target, monitor, source)
            self.probes_total += 1
            if result.local:  # this machine's trouble, not the backend's: no verdict
                self.local_failures += 1
                LOCAL_LOG.log(time.time(), logging.ERROR,
                              "probe of %s:%d could not run here (%s): no result",
                              target.host, target.port, result.error)  # fmt: skip
            else:
                self.store.record(target, source, result, monitor)
            if self.on_probe is not None:
                self.on_probe(target, source, result)
            if key in self._pending_first:
                self._pending_first.discard(key)
                if not self._pending_first:
                    self.first_round.set()
            elapsed = time.monotonic() - started
            await asyncio.sleep(next_delay(monitor.interval_s, elapsed, self.jitter, self.rng))

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        if self._session is not None:
            await self._session.close()
