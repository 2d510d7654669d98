"""Measuring a ramp a drill plan expects (docs/drills.md, "Expecting a ramp").

`{name: N, ramp: P}` after a step that moves N's answers to pool P: the load balancer's
`ramp: {duration, steps}` (read from the running server) says how they must move. At dnsd
the drill asks many times a second (a few hundred answers per step, with a DNS cookie so
response rate limiting does not drop them): the ramp begins with its first answer from P,
which must come within the expectation's `within`, and each step window's share from P is
judged by dnsd.drill.ramp_judge. Through a resolver a cached answer hides the steps (a TTL
is as long as a step, or longer), so there only the end is checked: every answer from P
(holding for the TTL + 1 s) by the ramp's end + the TTL + 1 s of slack.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from dnsd.drill.dnsclient import Answer, DnsClient
from dnsd.drill.plan import Expectation, Step, expected_addresses
from dnsd.drill.plan_results import ExpectationResult, LaneResult, StepResult
from dnsd.drill.plan_timing import HOLD_S, POLL_S, SLACK_S
from dnsd.drill.ramp_judge import RampVerdict, judge_ramp
from dnsd.explain import ecs_option


class PlanRunner(Protocol):
    """What a ramp's measurement takes from dnsd.drill.run_plan.PlanRunner."""

    live: Any
    bounds: dict[tuple[int, int], Any]
    plan: Any
    dns: tuple[str, int]
    resolvers: list[tuple[str, int]]

    def now(self) -> float: ...

    def faulted_addresses(self) -> frozenset[str]: ...


ANSWERS_PER_STEP = 400  # aimed at; the judgement needs ramp_judge.MIN_ANSWERS per window
MIN_RATE, MAX_RATE = 10.0, 1000.0  # queries per second at dnsd
WORKERS = 4  # queries in flight at dnsd, each on its own socket


def query_rate(duration_s: float, steps: int) -> float:
    """Queries per second at dnsd: ANSWERS_PER_STEP in each step's window."""
    return min(MAX_RATE, max(MIN_RATE, ANSWERS_PER_STEP * steps / duration_s))


async def expect_ramp(
    runner: PlanRunner, step: Step, index: int, e: Expectation, t0: float, out: StepResult
) -> ExpectationResult:
    live = runner.live
    assert live is not None and e.ramp is not None
    bound = runner.bounds[(step.index, index)]
    info = live.names[(e.name, e.vantage)]
    duration_s, steps = live.ramps[str(info.lb)]
    verdict = RampVerdict(e.ramp, duration_s, steps)
    result = ExpectationResult(step.index, e, bound, ramp=verdict)
    wanted, avoid = expected_addresses(e, live), runner.faulted_addresses()
    ecs = ecs_option(runner.plan.vantage[e.vantage]) if e.vantage else None
    latest_start = t0 + bound.seconds + SLACK_S
    rate = query_rate(duration_s, steps)
    samples: list[tuple[float, bool]] = []  # (asked at, from the ramp's pool) at dnsd
    dnsd = LaneResult("dnsd")
    recorded: dict[str, float] = {}  # lane → when its timeline last got an answer
    first_hit: list[float] = []  # the earliest answer from the pool at dnsd: the ramp began

    def start() -> float | None:
        return first_hit[0] if first_hit else None

    def reach_by() -> float:
        """When every answer through a resolver must be from the pool."""
        began = start()
        ends = (latest_start if began is None else began) + duration_s * (steps - 1) / steps
        return ends + info.ttl_s + SLACK_S

    def from_pool(answer: Answer) -> bool:
        got = set(answer.addresses)
        return bool(got) and got <= wanted and not got & avoid

    def record(lane: str, answer: Answer) -> None:
        # the timeline (plots, JSON) keeps an answer per poll period, as other steps have
        if answer.lost or answer.at - recorded.get(lane, -1.0) >= POLL_S:
            recorded[lane] = answer.at
            out.timeline.append((f"{e.name} from {e.vantage or 'here'} @ {lane}", answer))

    async def ask_dnsd(worker: int) -> None:
        client = await DnsClient(*runner.dns, timeout_s=0.5, cookie=True).open()
        try:
            sent = 0
            while True:
                began = start()
                now = runner.now()
                if now >= (latest_start if began is None else began + duration_s):
                    break
                answer = await client.query(e.name, now, ecs=ecs)
                dnsd.queries += 1
                dnsd.lost += answer.lost
                if not answer.lost:
                    hit = from_pool(answer)
                    samples.append((answer.at, hit))
                    if hit and (not first_hit or answer.at < first_hit[0]):
                        first_hit[:] = [answer.at]
                record("dnsd", answer)
                sent += 1
                await asyncio.sleep(max(0.0, t0 + (sent * WORKERS + worker) / rate - runner.now()))
        finally:
            client.close()

    async def ask_resolver(host: str, port: int) -> LaneResult:
        lr = LaneResult(f"resolver {host}:{port}", hold_s=info.ttl_s + HOLD_S)
        client = await DnsClient(host, port, timeout_s=0.5).open()
        streak: float | None = None
        try:
            tick = 0
            while streak is not None or runner.now() < reach_by():
                answer = await client.query(e.name, runner.now(), ecs=ecs)
                record(lr.lane, answer)
                lr.queries += 1
                lr.lost += answer.lost
                if answer.lost or not from_pool(answer):
                    streak = None
                else:
                    lr.fulfilled += 1
                    streak = answer.at if streak is None else streak
                if streak is not None and answer.at - streak >= lr.hold_s:
                    lr.measured_s = streak - t0
                    break
                tick += 1
                await asyncio.sleep(max(0.0, t0 + tick * POLL_S - runner.now()))
        finally:
            client.close()
        return lr

    lanes = await asyncio.gather(
        *(ask_dnsd(w) for w in range(WORKERS)), *(ask_resolver(*r) for r in runner.resolvers)
    )
    result.lanes = [dnsd, *(x for x in lanes if x is not None)]
    problems: list[str] = []
    began = start()
    if began is None:
        problems.append(
            f"dnsd: the ramp never began: no answer from pool {e.ramp} within "
            f"{bound.seconds:.2f}s (+{SLACK_S:g}s)"
        )
    else:
        dnsd.measured_s = verdict.started_s = began - t0
        verdict.shares = judge_ramp(samples, began, duration_s, steps, e.ramp)
        problems += [f"dnsd: {s.why}" for s in verdict.shares if not s.passed]
        out.notes.append(f"{e.describe()}: {verdict.summary()}")
    limit = reach_by() - t0
    for x in result.lanes[1:]:
        if x.measured_s is None or x.measured_s > limit:
            seen = "never" if x.measured_s is None else f"only after {x.measured_s:.2f}s"
            problems.append(
                f"{x.lane}: every answer from {e.ramp} {seen}; due by the ramp's end + TTL "
                f"+ {SLACK_S:g}s: {limit:.2f}s"
            )
    lost = sum(x.lost for x in result.lanes)
    if lost:
        problems.append(f"{lost} queries lost (timeout or SERVFAIL)")
    result.passed = not problems
    result.message = "; ".join(problems)
    return result
