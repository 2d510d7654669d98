"""What a drill plan's run found (dnsd.drill.run_plan): per step, per expectation, per lane,
and the JSON the report and `--json` give."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dnsd.drill.dnsclient import Answer
from dnsd.drill.plan import Bound, Expectation, Plan, Step
from dnsd.drill.ramp_judge import RampVerdict
from dnsd.drill.runner import timeline_json


@dataclass
class LaneResult:
    lane: str  # "dnsd" or "resolver ADDR:PORT"
    measured_s: float | None = None
    queries: int = 0
    lost: int = 0
    fulfilled: int = 0  # answers that fulfilled it, holding or not
    hold_s: float = 0.0  # how long the answers had to keep fulfilling it


@dataclass
class ExpectationResult:
    step: int
    expectation: Expectation
    bound: Bound
    lanes: list[LaneResult] = field(default_factory=list)
    passed: bool = False
    message: str = ""
    ramp: RampVerdict | None = None  # a ramp expectation: the shares per step at dnsd

    @property
    def label(self) -> str:
        return self.expectation.describe()

    def to_json(self) -> dict[str, Any]:
        e = self.expectation
        dnsd = next((x.measured_s for x in self.lanes if x.lane == "dnsd"), None)
        clients = [x.measured_s for x in self.lanes if x.lane != "dnsd"]
        # the slowest client lane (none: dnsd's own); None when one never got there
        slowest = [c for c in clients if c is not None]
        client = _round(max(slowest)) if clients and len(slowest) == len(clients) else None
        if not clients:
            client = _round(dnsd)
        return {
            "expectation": self.label,
            "name": e.name,
            "from": e.vantage,
            "pool": list(e.pools),
            "backend": "/".join(e.backend) if e.backend else None,
            "address": e.address,
            "ramp": None if self.ramp is None else self.ramp.to_json(),
            "within": e.within,
            "bound_s": round(self.bound.seconds, 3),
            "bound": self.bound.formula,
            "ttl_s": self.bound.ttl_s,
            "interval_s": self.bound.interval_s,
            "unhealthy_threshold": None if e.within == "failback_bound" else self.bound.threshold,
            "detect_s": _round(dnsd),
            "client_s": client,
            "failback_s": client if e.within == "failback_bound" else None,
            "lanes": {x.lane: _round(x.measured_s) for x in self.lanes},
            "queries": sum(x.queries for x in self.lanes),
            "lost": sum(x.lost for x in self.lanes),
            "passed": self.passed,
            "message": self.message,
            "line": e.line,
        }


@dataclass
class StepResult:
    step: Step
    started_at: float = 0.0  # seconds since the drill began
    finished_at: float = 0.0
    expectations: list[ExpectationResult] = field(default_factory=list)
    timeline: list[tuple[str, Answer]] = field(default_factory=list)  # lane label → answer
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(e.passed for e in self.expectations)


@dataclass
class PlanResult:
    plan: Plan
    steps: list[StepResult] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # address → "pool/backend"
    interrupted: str | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def expectations(self) -> list[ExpectationResult]:
        return [e for s in self.steps for e in s.expectations]

    @property
    def passed(self) -> bool:
        return (
            not self.interrupted
            and not self.errors
            and all(e.passed for e in self.expectations)
            and len(self.steps) == len(self.plan.steps)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan.name,
            "file": self.plan.file,
            "passed": self.passed,
            "interrupted": self.interrupted,
            "errors": self.errors,
            "steps": [
                {
                    "scenario": f"step {s.step.index}: {s.step.name}",
                    "step": s.step.index,
                    "name": s.step.name,
                    "fault": s.step.fault.describe() if s.step.fault else None,
                    "restore": s.step.restore,
                    "started_at": round(s.started_at, 3),
                    "passed": s.passed,
                    "notes": s.notes,
                    "expectations": [e.to_json() for e in s.expectations],
                    "timeline": timeline_json(s.timeline),
                }
                for s in self.steps
            ],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
