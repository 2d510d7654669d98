"""The main process's worker processes (`--workers N`): started on the addresses the main
process bound, their query counts into its /metrics, their liveness into its readiness."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dnsd.admin.metrics import Metrics
from dnsd.health.store import HealthStore
from dnsd.net.supervisor import ServingLoops
from dnsd.workers import WorkerPool


def start_workers(
    count: int,
    worker_argv: tuple[str, ...],
    bound: list[tuple[str, int]],
    store: HealthStore,
    serials: Callable[[], dict[str, int]],
    metrics: Metrics,
    loops: ServingLoops,
) -> WorkerPool:
    """Each worker gets the bound ports (port 0 is a real port by now) as its --listen."""
    listen = [f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in bound]
    argv = [*worker_argv, *(a for x in listen for a in ("--listen", x))]
    counts = WorkerCounts(metrics, loops)
    pool = WorkerPool(count, argv, store, report=counts.report, retire=counts.retired,
                      serials=serials, restarted=counts.restarted)  # fmt: skip
    pool.start()
    loops.external_down = pool.dead  # a dead worker: not ready
    return pool


class WorkerCounts:
    """What the workers report, in the main process's metrics and serving loops."""

    def __init__(self, metrics: Metrics, loops: ServingLoops) -> None:
        self.metrics = metrics
        self.loops = loops

    def report(self, pid: int, counts: dict[str, Any]) -> None:
        self.metrics.set_worker_counts(pid, counts)
        self.loops.worker_report(pid, counts.get("loops", {}))

    def restarted(self) -> None:
        self.loops.add_restart("worker")

    def retired(self, pid: int) -> None:
        self.metrics.retire_worker(pid)
        self.loops.worker_retired(pid)
