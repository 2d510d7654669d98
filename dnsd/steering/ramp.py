"""Ramps (docs/steering.md, ramps): the share of a move in force at a time — a pure rule.

A ramp moves a client region's answers from the pool it left (`from`, still healthy) to
its new first choice (`to`) in `steps` equal shares over `duration`: during step k
(k = 1 … steps, each lasting duration / steps from the ramp's start) the new choice gets
k / steps of the answers and the pool left the rest. The first share moves at once, the
last step is the whole move; from then on (and before the start) no ramp is in force.
When the ramp started and between which pools is runtime state (the health view's
`ramps`, dnsd.serve.ramps derives it); what share holds at a time is this module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dnsd.config.model import LoadBalancer, Ramp
from dnsd.health.view import HealthView, RampStart, TrickleRamp


def step_at(ramp: Ramp, start_s: float, now: float) -> int | None:
    """The step in force at `now` (1 … steps - 1), or None: no ramp in force (not started,
    or in its last step, which is the whole move)."""
    if now < start_s:
        return None
    k = math.floor((now - start_s) * ramp.steps / ramp.duration_s) + 1
    return k if k < ramp.steps else None


def share_at(ramp: Ramp, start_s: float, now: float) -> float:
    """The share of answers the new choice gets at `now` (1.0: the whole move)."""
    k = step_at(ramp, start_s, now)
    return 1.0 if k is None else k / ramp.steps


def step_ends(ramp: Ramp, start_s: float, now: float) -> float:
    """When the share in force at `now` changes next (inf: no ramp in force); a plan
    built with that share holds until then, not a moment longer."""
    k = step_at(ramp, start_s, now)
    return math.inf if k is None else start_s + k * ramp.duration_s / ramp.steps


def in_force(
    lb: LoadBalancer, ramps: Mapping[tuple[str, str], RampStart], now: float
) -> list[dict[str, Any]]:
    """The ramps of `lb` in force at `now`, one per client region ("" for clients with no
    region): what status, the metrics and events show."""
    out: list[dict[str, Any]] = []
    ramp = lb.ramp
    if ramp is None:
        return out
    for (name, region), start in sorted(ramps.items()):
        step = step_at(ramp, start.start_s, now) if name == lb.name else None
        if step is None:
            continue
        out.append(
            {
                "region": region,
                "from": start.from_ref,
                "to": start.to_ref,
                "since": start.start_s,
                "step": step,
                "steps": ramp.steps,
                "share": step / ramp.steps,
                "next_step_at": step_ends(ramp, start.start_s, now),
            }
        )
    return out


def ramp_status(lb: LoadBalancer, view: HealthView, now: float) -> dict[str, Any] | None:
    """The status document's `ramp` of a load balancer: its ramp and the shares in force."""
    if lb.ramp is None:
        return None
    return {
        "duration_s": lb.ramp.duration_s,
        "steps": lb.ramp.steps,
        "in_force": in_force(lb, view.ramps, now),
        "trickle": trickle_status(
            lb, view.trickle_ramps.get(lb.name), view.trickle_ratio(lb.name, lb.trickle_ratio), now
        ),
    }


def trickle_status(
    lb: LoadBalancer, ramp: TrickleRamp | None, current: float, now: float
) -> dict[str, Any] | None:
    """The trickle ratio's ramp in force: from, to, the ratio now, step, steps."""
    ratio, step, until = trickle_at(lb, ramp, current, now)
    if ramp is None or step is None or lb.ramp is None:
        return None
    return {
        "from": ramp.ratio_from,
        "to": ramp.ratio_to,
        "ratio": ratio,
        "step": step,
        "steps": lb.ramp.steps,
        "since": ramp.start_s,
        "next_step_at": until,
    }


def trickle_at(
    lb: LoadBalancer, ramp: TrickleRamp | None, current: float, now: float
) -> tuple[float, int | None, float]:
    """(the trickle ratio in force, the step or None, until when it holds): a ramp of the
    ratio is in force while the configured or overridden ratio is still the one it moves
    to; during step k the ratio is k / steps of the way."""
    if lb.ramp is None or ramp is None or ramp.ratio_to != current:
        return current, None, math.inf
    step = step_at(lb.ramp, ramp.start_s, now)
    if step is None:
        return current, None, math.inf
    ratio = ramp.ratio_from + (ramp.ratio_to - ramp.ratio_from) * step / lb.ramp.steps
    return ratio, step, step_ends(lb.ramp, ramp.start_s, now)
