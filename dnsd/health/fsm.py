"""The per (backend, probe source) health state machine (docs/health.md, state machine).

unknown → healthy/unhealthy: the first completed probe decides directly; afterwards the
state flips only after `healthy_threshold` consecutive successes or `unhealthy_threshold`
consecutive failures. Pure: the caller passes the result and its time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

State = Literal["unknown", "healthy", "unhealthy"]


@dataclass(frozen=True, slots=True)
class ProbeResult:
    ok: bool
    at: float  # wall-clock seconds when the probe finished
    rtt_ms: float | None = None  # for successful probes
    error: str | None = None  # why it failed
    local: bool = False  # failed for a reason on this machine: no result, not the backend's


@dataclass(frozen=True, slots=True)
class SourceState:
    state: State = "unknown"
    successes: int = 0  # consecutive
    failures: int = 0  # consecutive
    since: float = 0.0  # when the state was entered
    last: ProbeResult | None = None


@dataclass(frozen=True, slots=True)
class Transition:
    old: State
    new: State
    at: float
    reason: str


def on_result(
    current: SourceState, result: ProbeResult, healthy_threshold: int, unhealthy_threshold: int
) -> tuple[SourceState, Transition | None]:
    if result.ok:
        counted = replace(current, successes=current.successes + 1, failures=0, last=result)
        target: State = "healthy"
        needed, streak = healthy_threshold, counted.successes
    else:
        counted = replace(current, failures=current.failures + 1, successes=0, last=result)
        target = "unhealthy"
        needed, streak = unhealthy_threshold, counted.failures
    if current.state == target:
        return counted, None
    if current.state != "unknown" and streak < needed:
        return counted, None
    why = "probe ok" if result.ok else f"probe failed: {result.error or 'error'}"
    if current.state == "unknown":
        reason = f"first probe: {why}"
    else:
        plural = "successes" if result.ok else "failures"
        reason = f"{streak} consecutive {plural} ({why})"
    new = replace(counted, state=target, since=result.at)
    return new, Transition(current.state, target, result.at, reason)
