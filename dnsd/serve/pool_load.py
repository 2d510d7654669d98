"""The capacity waterfall's meter (docs/steering.md, capacity waterfall): answers per pool
over the last 10 s, and the share of what reaches each full pool it may take.

Once a second, in the main process, the answers each pool with a `capacity` got (every
load balancer, every serving loop and worker process: the counts `dnsd_lb_answers_total`
is made of) are compared with the count 10 s before: the pool's load in answers per
second. What was *offered* to it is that load divided by the mean share it was admitting
meanwhile (it took that share of what reached it), so the next share is
min(1, capacity ÷ offered): steady demand is met in one step, not by trial. Load and
shares go into the health view (`pool_load`, `pool_admit`) with a new `generation` only,
as RTTs do: plans of load balancers with `overflow: waterfall` are built again, the others
stay cached. `dnsd_pool_load_ratio{pool}` = load ÷ capacity; the status shows both.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType

from prometheus_client.core import GaugeMetricFamily

from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView
from dnsd.snapshot import SnapshotHolder

WINDOW_S = 10.0
TICK_S = 1.0
Counts = Mapping[tuple[str, str, str], int]  # (lb, pool, region) → answers


def per_pool(counts: Counts) -> dict[str, int]:
    out: dict[str, int] = {}
    for (_, pool, _), count in counts.items():
        out[pool] = out.get(pool, 0) + count
    return out


def shares(
    capacities: Mapping[str, float],
    answered: Mapping[str, int],
    elapsed_s: float,
    admitted: Mapping[str, float],
) -> tuple[dict[str, float], dict[str, float]]:
    """(answers per second, share to admit next) per pool with a capacity (pure):
    `answered` in `elapsed_s`, while it admitted `admitted` on average."""
    load, admit = {}, {}
    for pool, capacity in capacities.items():
        rate = answered.get(pool, 0) / elapsed_s
        offered = rate / max(admitted.get(pool, 1.0), 1e-6)
        load[pool] = rate
        admit[pool] = 1.0 if offered <= capacity else capacity / offered
    return load, admit


class PoolLoad:
    def __init__(
        self,
        holder: SnapshotHolder,
        store: HealthStore,
        counts: Callable[[], Counts],
        on_publish: Callable[[HealthView], None] = lambda _view: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.holder, self.store, self.counts, self.clock = holder, store, counts, clock
        self.on_publish = on_publish  # worker processes get the shares too
        # (when, answers per pool so far, the shares in force in the second before)
        self._samples: deque[tuple[float, dict[str, int], Mapping[str, float]]] = deque()

    async def run(self) -> None:
        while True:
            self.tick()
            await asyncio.sleep(TICK_S)

    def tick(self) -> None:
        view, config = self.store.view, self.holder.current.config
        waterfalls = any(lb.overflow == "waterfall" for lb in config.load_balancers.values())
        capacities = {
            name: pool.capacity
            for name, pool in config.pools.items()
            if pool.capacity is not None and waterfalls  # measured only where something spills
        }
        if not capacities:
            self._samples.clear()
            if view.pool_admit or view.pool_load:
                self._publish({}, {})
            return
        now = self.clock()
        self._samples.append((now, per_pool(self.counts()), view.pool_admit))
        while len(self._samples) > 2 and now - self._samples[1][0] >= WINDOW_S:
            self._samples.popleft()
        first, elapsed = self._samples[0], now - self._samples[0][0]
        if elapsed <= 0:
            return
        totals = self._samples[-1][1]
        answered = {pool: totals.get(pool, 0) - first[1].get(pool, 0) for pool in capacities}
        later = list(self._samples)[1:]
        admitted = {
            pool: sum(s[2].get(pool, 1.0) for s in later) / len(later) for pool in capacities
        }
        load, admit = shares(capacities, answered, elapsed, admitted)
        self._publish(load, admit)

    def _publish(self, load: dict[str, float], admit: dict[str, float]) -> None:
        view = self.store.view
        if admit == dict(view.pool_admit) and load == dict(view.pool_load):
            return
        self.store.view = replace(
            view,
            pool_admit=MappingProxyType(admit),
            pool_load=MappingProxyType(load),
            generation=view.generation + 1,
        )
        self.on_publish(self.store.view)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ratio = GaugeMetricFamily(
            "dnsd_pool_load_ratio",
            "Answers per second a pool got over the last 10 s divided by its capacity",
            labels=["pool"],
        )
        pools, load = self.holder.current.config.pools, self.store.view.pool_load
        for name, rate in sorted(load.items()):
            pool = pools.get(name)
            if pool is not None and pool.capacity:
                ratio.add_metric([name], rate / pool.capacity)
        yield ratio
