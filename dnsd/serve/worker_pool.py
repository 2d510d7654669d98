"""The main process's worker processes (`--workers N`): started on the addresses the main
process bound, their query counts into its /metrics, their liveness into its readiness."""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from dnsd.admin.metrics import Metrics
from dnsd.health.store import HealthStore
from dnsd.net.supervisor import ServingLoops
from dnsd.reply import Client
from dnsd.workers import Updates, WorkerPool


def start_workers(
    count: int,
    worker_argv: tuple[str, ...],
    bound: list[tuple[str, int]],
    store: HealthStore,
    serials: Callable[[], dict[str, int]],
    metrics: Metrics,
    loops: ServingLoops,
    updates: Callable[[bytes, Client], Awaitable[bytes]] | None = None,
) -> WorkerPool:
    """Each worker gets the bound ports (port 0 is a real port by now) as its --listen;
    `updates` answers the UPDATEs the workers pass up."""
    listen = [f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in bound]
    argv = [*worker_argv, *(a for x in listen for a in ("--listen", x))]
    counts = WorkerCounts(metrics, loops)
    passed_up = _passed_up(updates) if updates is not None else None
    pool = WorkerPool(
        count,
        argv,
        store,
        report=counts.report,
        retire=counts.retired,
        serials=serials,
        restarted=counts.restarted,
        updates=passed_up,
    )
    pool.start()
    loops.external_down = pool.dead  # a dead worker: not ready
    return pool


def _passed_up(updates: Callable[[bytes, Client], Awaitable[bytes]]) -> Updates:
    """An UPDATE a worker passed up (its client as plain values), answered as if it had
    come to this process."""

    def answer(wire: bytes, address: str, transport: Literal["udp", "tcp"]) -> Awaitable[bytes]:
        return updates(wire, Client(ipaddress.ip_address(address), transport))

    return answer


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
