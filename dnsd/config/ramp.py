"""A load balancer's `ramp: {duration, steps}` (docs/steering.md, ramps), checked."""

from __future__ import annotations

from dnsd.config.checker import Checker, join
from dnsd.config.model import Ramp
from dnsd.config.yamlio import LineDict

MAX_STEPS = 100


def read_ramp(ck: Checker, d: LineDict, path: str, ttl: int) -> Ramp | None:
    """The ramp, or None when there is none (or it is wrong: every error is reported)."""
    if "ramp" not in d:
        return None
    sub = join(path, "ramp")
    r = ck.mapping(d["ramp"], d.line_of("ramp"), sub)
    if r is None:
        return None
    ck.keys(r, sub, ("duration", "steps"), required=("duration", "steps"))
    duration = ck.get_duration(r, "duration", sub, default=None, lo=0.001)
    steps = ck.get_int(r, "steps", sub, default=None, lo=1, hi=MAX_STEPS)
    if duration is None or steps is None:
        return None
    if steps == 1:
        ck.warn(r.line_of("steps"), join(sub, "steps"), "one step is the whole move: no ramp")
    elif duration / steps < ttl:
        # A resolver keeps an answer for the TTL: a shorter step is never seen as a step.
        ck.warn(
            r.line_of("duration"),
            join(sub, "duration"),
            f"each of the {steps} steps lasts {duration / steps:g} s, shorter than the "
            f"ttl {ttl} s: resolvers keep answers longer than a step (make each step at "
            "least the TTL)",
        )
    return Ramp(duration, steps)
