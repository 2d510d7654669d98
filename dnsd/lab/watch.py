"""The lab's watch: the watched region's node and resolver polled every 50 ms from inside
the region's namespace, the timeline kept, and the bounds answers must move within.

Lanes: `dnsd` asks the watched region's own node directly, `resolver` asks the region's
unbound (a stub zone over all three nodes).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dnsd.drill.dnsclient import Answer
from dnsd.drill.plan_timing import SLACK_S
from dnsd.drill.runner import DrillResult
from dnsd.lab.lab import ask
from dnsd.lab.topology import INTERVAL_S, REGIONS, THRESHOLD, TTL_S, ZONE, Region

PROBE_TIMEOUT_S = 0.4
# health decided (threshold failed probes, one timeout) + shared through Redis + the TTL
DETECT_BOUND_S = INTERVAL_S * THRESHOLD + PROBE_TIMEOUT_S + 1.0
BOUND_S = DETECT_BOUND_S + TTL_S
POLL_S = 0.05


class Watch:
    """Polls the region's node and resolver every 50 ms and keeps the timeline."""

    def __init__(self, result: DrillResult, region: Region, name: str = f"www.{ZONE}") -> None:
        self.result, self.region, self.name = result, region, name
        self.started = time.monotonic()
        self.late_s: float | None = 0.0

    def now(self) -> float:
        return time.monotonic() - self.started

    def poll(self) -> dict[str, tuple[str, ...] | None]:
        out: dict[str, tuple[str, ...] | None] = {}
        # A stub resolver waits seconds for its resolver (glibc: 5 s), which meanwhile may
        # retry another name server; the node itself must answer at once.
        lanes = (("dnsd", self.region.node, 1.0), ("resolver", self.region.resolver, 3.0))
        for lane, server, timeout in lanes:
            at = self.now()
            got = ask(self.region.ns, server, self.name, timeout=timeout)
            answer = Answer(at, "TIMEOUT" if got is None else "NOERROR", tuple(got or ()), None)
            self.result.timeline.append((lane, answer))
            out[lane] = None if got is None else tuple(got)
        return out

    def until(
        self, lane: str, wanted: Callable[[tuple[str, ...]], bool], timeout: float
    ) -> float | None:
        """Seconds from now until `lane` answers as wanted (None: not within timeout)."""
        started = self.now()
        while self.now() - started < timeout:
            got = self.poll()[lane]
            if got is not None and wanted(got):
                return self.now() - started
            time.sleep(POLL_S)
        return None

    def moved(self, result: DrillResult, wanted: Callable[[tuple[str, ...]], bool]) -> None:
        """detect_s: until the region's node answers as wanted; client_s: until its resolver
        does. The resolver asks any of the three nodes (a stub zone over all), so the other
        nodes are watched too: `late_s` is how far the last node to move was past the
        detection bound (on a loaded machine the probe timers slip, and a resolver can only
        follow the slowest node it asks)."""
        started = self.now()
        others = tuple(r.node for r in REGIONS if r.node != self.region.node)
        first: dict[str, float] = {}
        while self.now() - started < BOUND_S + 5 and len(first) < 2 + len(others):
            got = self.poll()
            for lane in ("dnsd", "resolver"):
                answer = got[lane]
                if lane not in first and answer is not None and wanted(answer):
                    first[lane] = self.now() - started
            for node in others:
                if node not in first and wanted(tuple(ask(self.region.ns, node, self.name) or ())):
                    first[node] = self.now() - started
            time.sleep(POLL_S)
        result.detect_s = first.get("dnsd")
        result.client_s = first.get("resolver")
        moves = [first.get(n) for n in ("dnsd", *others)]
        # None: a node never moved, which no lateness excuses
        self.late_s = (
            None if None in moves else max(0.0, max(m or 0.0 for m in moves) - DETECT_BOUND_S)
        )
        if self.late_s:
            result.notes.append(
                f"the last node moved {self.late_s:.2f} s past the detection bound"
                " (a loaded machine): the resolver's bound moves with it"
            )

    def within_bound(self, result: DrillResult) -> bool:
        """The resolver moved within TTL of the last node's move, that one within the
        detection bound or as late as the machine made it; with a drill plan's slack (the
        poll period, and the resolver's whole-second clock: an answer cached at 2.4 s with
        TTL 2 may be served until 5 s)."""
        return (
            self.late_s is not None
            and result.client_s is not None
            and result.client_s <= BOUND_S + self.late_s + SLACK_S
        )

    def hold(self, seconds: float, ok: Callable[[dict[str, tuple[str, ...] | None]], bool]) -> bool:
        """Poll for `seconds`; False if any poll is not ok."""
        good = True
        end = self.now() + seconds
        while self.now() < end:
            good = ok(self.poll()) and good
            time.sleep(POLL_S)
        return good
