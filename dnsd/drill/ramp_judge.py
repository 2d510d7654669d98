"""Judging a ramp a drill plan expects (docs/drills.md, "Expecting a ramp"): pure.

With `ramp: {duration, steps}` (docs/steering.md, ramps) step k of a move lasts
duration / steps from the ramp's start, and during it the new first choice gets k / steps of
the answers; the last step is the whole move. The drill measures the start at dnsd (its
first answer from the destination pool) and cuts its answers into those step windows; each
window's share from the destination is judged here:

* steps 1 … steps-1: the share is within the binomial interval or ±10 points of k / steps,
  whichever is wider (a few hundred answers per window make both about 10 points), and not
  every answer already from the destination — unless that could happen by chance
  (share^n ≥ 0.001). The interval is 99.9% for the ramp as a whole: each of its steps - 1
  windows at 1 - 0.001 / (steps - 1) (Bonferroni), so a true ramp of any length fails a
  drill by chance at most once in a thousand;
* the last step: every answer from the destination.

Answers within EDGE_S of a window's boundary are not judged: the start is known to within
a query's round trip, and the step in force at a boundary is either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

CONFIDENCE = 0.999  # for the whole ramp
TOLERANCE = 0.10  # ±10 points: the least a window's share may differ by
MIN_ANSWERS = 100  # fewer answers in a window judge nothing
CHANCE = 0.001  # all answers from the destination by chance: below this, it is a finding
EDGE_S = 0.1


@dataclass(frozen=True, slots=True)
class StepShare:
    """One step window at dnsd: how many answers, how many from the destination."""

    step: int  # 1-based
    steps: int
    answers: int
    to_pool: int
    passed: bool
    why: str = ""

    @property
    def expected(self) -> float:
        return self.step / self.steps

    @property
    def measured(self) -> float | None:
        return self.to_pool / self.answers if self.answers else None

    def to_json(self) -> dict[str, Any]:
        measured = self.measured
        return {
            "step": self.step,
            "expected_share": round(self.expected, 4),
            "measured_share": None if measured is None else round(measured, 4),
            "answers": self.answers,
            "to_pool": self.to_pool,
            "tolerance": round(tolerance(self.expected, self.answers, self.steps), 4),
            "passed": self.passed,
            "why": self.why,
        }


@dataclass
class RampVerdict:
    """What a ramp expectation found at dnsd (the resolvers' part is a lane's time)."""

    pool: str
    duration_s: float
    steps: int
    started_s: float | None = None  # the ramp's first answer, since the step's change
    shares: list[StepShare] = field(default_factory=list)

    def summary(self) -> str:
        measured = " ".join("-" if s.measured is None else f"{s.measured:.0%}" for s in self.shares)
        expected = " ".join(f"{s.expected:.0%}" for s in self.shares)
        answers = "/".join(str(s.answers) for s in self.shares)
        return (
            f"shares from {self.pool} per step at dnsd: {measured or '-'} "
            f"(expected {expected}; {answers} answers)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "duration_s": self.duration_s,
            "steps": self.steps,
            "started_s": None if self.started_s is None else round(self.started_s, 3),
            "shares": [s.to_json() for s in self.shares],
        }


def z_score(steps: int) -> float:
    """The two-sided normal quantile for one of a ramp's steps - 1 judged windows."""
    return NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / max(1, steps - 1) / 2)


def tolerance(share: float, answers: int, steps: int) -> float:
    """How far a window's measured share may be from `share`: the binomial half interval
    (99.9% for the whole ramp) or 10 points, whichever is wider."""
    if answers <= 0:
        return 1.0
    return max(z_score(steps) * math.sqrt(share * (1 - share) / answers), TOLERANCE)


def judge_step(step: int, steps: int, answers: int, to_pool: int, pool: str) -> StepShare:
    """One step window's verdict (see the module's docstring)."""
    share = step / steps

    def verdict(passed: bool, why: str = "") -> StepShare:
        return StepShare(step, steps, answers, to_pool, passed, why)

    head = f"step {step} of {steps}: {to_pool}/{answers} answers from {pool}"
    if step == steps:
        if answers == 0:
            return verdict(False, f"step {step} of {steps}: no answers after the ramp's end")
        if to_pool < answers:
            return verdict(False, f"{head} after the ramp's last step began, not all")
        return verdict(True)
    if answers < MIN_ANSWERS:
        return verdict(False, f"{head}: too few to judge (at least {MIN_ANSWERS} needed)")
    measured, tol = to_pool / answers, tolerance(share, answers, steps)
    if to_pool == answers and share**answers < CHANCE:
        return verdict(False, f"{head}: every answer already, not {share:.0%}: not ramped")
    if abs(measured - share) > tol:
        return verdict(
            False, f"{head} ({measured:.0%}), expected {share:.0%} ± {tol * 100:.0f} points"
        )
    return verdict(True)


def judge_ramp(
    samples: Sequence[tuple[float, bool]],
    start: float,
    duration_s: float,
    steps: int,
    pool: str,
    edge_s: float = EDGE_S,
) -> list[StepShare]:
    """Every step's verdict from (time asked, whether the answer was from the destination)
    of each answered query, the ramp having begun at `start`."""
    width = duration_s / steps
    edge = min(edge_s, width / 4)
    counts = [[0, 0] for _ in range(steps)]  # per step: answers, from the destination
    for at, hit in samples:
        offset = at - start
        k = math.floor(offset / width)
        if not 0 <= k < steps or min(offset - k * width, (k + 1) * width - offset) < edge:
            continue
        counts[k][0] += 1
        counts[k][1] += hit
    return [judge_step(k + 1, steps, n, hits, pool) for k, (n, hits) in enumerate(counts)]
