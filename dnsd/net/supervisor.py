"""Serving loops that never die silently (docs/api.md, status at scale: serving-loop
health).

Every serving loop (a UDP thread, compiled or pure; the TCP handler; a worker process) has a
`LoopState`: the answers it sent, how often it was restarted, and whether it is down right
now. A loop that raises is logged through the logger (once per failure streak, with its
traceback), counted, and started again after a pause that doubles while it keeps failing;
while any listener is down `/readyz` says 503 and systemd's STATUS names it.
`dnsd_serving_loop_answers_total{loop}` and `dnsd_serving_loop_restarts_total{loop}` come
from here.

Fault injection, for the tests only (`dnsd serve --test-fault-dir DIR`): a loop raises at each
batch (and each restart) while a file named after its kind (`compiled`, `pure`, `tcp`) exists
there. Unset, it costs one `is None` test per batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

log = logging.getLogger("dnsd.net")

FIRST_PAUSE_S = 0.2  # before the first restart; doubled while the loop keeps failing
MAX_PAUSE_S = 5.0
HEALTHY_AFTER_S = 30.0  # a loop that ran this long without failing starts over at FIRST_PAUSE_S


class InjectedFault(RuntimeError):
    """Raised by the test-only fault hook."""


@dataclass(frozen=True, slots=True)
class FaultHook:
    directory: Path

    def check(self, kind: str) -> None:
        if (self.directory / kind).exists():
            raise InjectedFault(f"injected fault in the {kind} serving loop")


class _Switches:
    fault_dir: Path | None = None  # set by --test-fault-dir (dnsd.cli.test_hooks)


SWITCHES = _Switches()


def fault_hook() -> FaultHook | None:
    where = SWITCHES.fault_dir
    return FaultHook(where) if where else None


@dataclass(slots=True)
class LoopState:
    """One serving loop. Only its own thread writes `answers`; the rest under the GIL."""

    kind: str  # compiled | pure | tcp | worker
    listener: str  # what is down when it is: "udp 127.0.0.1:53", "worker 2"
    answers: dict[str, int] = field(default_factory=dict)  # by the code that built the reply
    restarts: int = 0
    down_since: float | None = None
    error: str = ""

    def count(self, code: str, n: int) -> None:
        if n:
            self.answers[code] = self.answers.get(code, 0) + n


class ServingLoops:
    """Every serving loop of this process (and the workers' reports): readiness and metrics."""

    def __init__(self) -> None:
        self.loops: list[LoopState] = []
        self.faults = fault_hook()
        self._reported: dict[int, dict[str, Any]] = {}  # worker pid → its last report
        self._retired: dict[str, dict[str, int]] = {"answers": {}, "restarts": {}}
        self.external_down: Callable[[], list[str]] = list  # e.g. dead worker processes

    def add(self, kind: str, listener: str) -> LoopState:
        state = LoopState(kind, listener)
        self.loops.append(state)
        return state

    def add_restart(self, kind: str) -> None:
        """A restart that no LoopState of this process saw (a worker process started again)."""
        restarts = self._retired["restarts"]
        restarts[kind] = restarts.get(kind, 0) + 1

    def down(self) -> list[str]:
        """The listeners not serving right now, with why: this process's, the workers'."""
        own = [f"{s.listener} ({s.error})" for s in self.loops if s.down_since is not None]
        workers = [
            f"worker {pid}: {listener}"
            for pid, report in list(self._reported.items())
            for listener in report.get("down", ())
        ]
        return own + workers + self.external_down()

    def counts(self) -> dict[str, dict[str, int]]:
        """Answers by loop code and restarts by loop kind: this process's own."""
        answers: dict[str, int] = {}
        restarts: dict[str, int] = {}
        for s in list(self.loops):
            for code, n in list(s.answers.items()):
                answers[code] = answers.get(code, 0) + n
            restarts[s.kind] = restarts.get(s.kind, 0) + s.restarts
        return {"answers": answers, "restarts": restarts}

    def report(self) -> dict[str, Any]:
        """What a worker process tells the main one: its counts and its listeners down."""
        return {**self.counts(), "down": self.down()}

    def worker_report(self, pid: int, report: dict[str, Any]) -> None:
        self._reported[pid] = report

    def worker_retired(self, pid: int) -> None:
        counts = self._reported.pop(pid, None)
        if counts:
            self._retired = _add(self._retired, counts)

    def totals(self) -> dict[str, dict[str, int]]:
        total = _add(self.counts(), self._retired)
        for counts in list(self._reported.values()):
            total = _add(total, counts)
        return total

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """Its Prometheus collector (Metrics.register)."""
        total = self.totals()
        answers = CounterMetricFamily(
            "dnsd_serving_loop_answers",
            "Replies sent, by the serving loop code that built them",
            labels=["loop"],
        )
        for code in ("compiled", "pure", "tcp"):
            answers.add_metric([code], total["answers"].get(code, 0))
        yield answers
        restarts = CounterMetricFamily(
            "dnsd_serving_loop_restarts",
            "Serving loops restarted after an unexpected error",
            labels=["loop"],
        )
        for kind in ("compiled", "pure", "tcp", "worker"):
            restarts.add_metric([kind], total["restarts"].get(kind, 0))
        yield restarts
        down = GaugeMetricFamily("dnsd_serving_loops_down", "Listeners not serving right now")
        down.add_metric([], len(self.down()))
        yield down


def _add(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for part in ("answers", "restarts"):
        merged = dict(a.get(part, {}))
        for key, n in b.get(part, {}).items():
            merged[key] = merged.get(key, 0) + n
        out[part] = merged
    return out


def supervise(
    state: LoopState, serve: Callable[[Callable[[], None]], None], stopping: Callable[[], bool]
) -> None:
    """Run `serve(started)` (a blocking loop that returns only when stopping; it calls
    `started()` once it is ready to receive) in the calling thread. When it raises: down,
    logged once per streak of the same error, paused, started again."""
    pause = FIRST_PAUSE_S
    while not stopping():
        began = time.monotonic()
        try:
            serve(lambda: _back(state))
            return
        except Exception as exc:
            if stopping():
                return
            why = f"{type(exc).__name__}: {exc}"
            if state.down_since is None:  # a new streak: the whole story, once
                log.error(
                    "%s: the %s serving loop failed, restarting it",
                    state.listener,
                    state.kind,
                    exc_info=True,
                )
            elif why != state.error:
                log.error(
                    "%s: the %s serving loop failed again: %s", state.listener, state.kind, why
                )
            if state.down_since is None:
                state.down_since = time.time()
            state.error = why
        if time.monotonic() - began >= HEALTHY_AFTER_S:
            pause = FIRST_PAUSE_S
        _sleep(pause, stopping)
        pause = min(pause * 2, MAX_PAUSE_S)
        state.restarts += 1


def _sleep(seconds: float, stopping: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while not stopping() and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))


def _back(state: LoopState) -> None:
    """The loop is ready to receive again."""
    if state.down_since is not None:
        log.warning(
            "%s: the %s serving loop is serving again (%d restart(s) so far)",
            state.listener,
            state.kind,
            state.restarts,
        )
    state.down_since = None
    state.error = ""
