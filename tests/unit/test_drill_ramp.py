"""A drill plan expecting a ramp (dnsd.drill.plan, dnsd.drill.ramp_judge): the syntax, the
check against the live config (a load balancer without `ramp:` is refused) and the
per-step judgement of the shares, on seeded tables."""

from __future__ import annotations

import random

import pytest

from dnsd.drill.plan import (
    LiveConfig,
    MonitorTiming,
    NameInfo,
    PlanError,
    bound_for,
    check_against,
    expected_addresses,
    fault_for_s,
    load_plan,
)
from dnsd.drill.ramp_judge import (
    MIN_ANSWERS,
    RampVerdict,
    judge_ramp,
    judge_step,
    tolerance,
    z_score,
)
from dnsd.drill.ramp_watch import query_rate

PLAN = """\
name: eu failback
vantage: {eu: 85.214.0.0/24}
steps:
  - fault: {pool: eu}
    expect: [{name: www.shop.example, from: eu, pool: us}]
  - restore: true
    expect: [{name: www.shop.example, from: eu, ramp: eu, within: failback_bound}]
"""

FAST = MonitorTiming(interval_s=1.0, timeout_s=0.5, healthy_threshold=2, unhealthy_threshold=2)


def live(ramp: bool = True) -> LiveConfig:
    return LiveConfig(
        pools={"eu": {"eu-1": "192.0.2.1"}, "us": {"us-1": "198.51.100.1"}},
        timing={"eu": FAST, "us": FAST},
        lbs={"web"},
        ramps={"web": (600.0, 5)} if ramp else {},
        names={("www.shop.example", "eu"): NameInfo("web", 30.0, ("eu", "us"))},
    )


def test_a_ramp_expectation_loads_fits_and_reads_as_a_ramp() -> None:
    plan = load_plan(PLAN, "p.yaml")
    e = plan.steps[1].expect[0]
    assert (e.ramp, e.pools, e.within) == ("eu", (), "failback_bound")
    assert e.describe() == "www.shop.example from eu -> ramp to pool eu within failback_bound"
    assert check_against(plan, live()) == []
    assert expected_addresses(e, live()) == {"192.0.2.1"}
    # the ramp must begin within the failback bound: eu's monitor, healthy_threshold
    assert bound_for(e, live()).seconds == 1.0 * 2 + 0.5 + 30.0
    # an injected override outlives the ramps the drill watches (their duration is passed in)
    bounds = {(2, 0): bound_for(e, live())}
    assert fault_for_s(plan, bounds, ramps_s=631.0) == fault_for_s(plan, bounds) + 631.0


@pytest.mark.parametrize(
    ("expect", "message"),
    [
        (
            "{name: www.shop.example, ramp: eu, pool: eu}",
            "p.yaml:7: steps[1].expect[0]: an expectation names one of pool, backend, "
            "address or ramp",
        ),
        (
            "{name: www.shop.example, rampp: eu}",
            'p.yaml:7: steps[1].expect[0].rampp: unknown key (did you mean "ramp"?)',
        ),
    ],
)
def test_a_wrong_ramp_expectation_is_refused_with_its_line(expect: str, message: str) -> None:
    text = PLAN.replace(
        "{name: www.shop.example, from: eu, ramp: eu, within: failback_bound}", expect
    )
    with pytest.raises(PlanError) as caught:
        load_plan(text, "p.yaml")
    assert message in [str(r) for r in caught.value.reasons], caught.value


def test_a_ramp_on_a_load_balancer_without_one_or_to_a_missing_pool_does_not_fit() -> None:
    plan = load_plan(PLAN, "p.yaml")
    assert [str(r) for r in check_against(plan, live(ramp=False))] == [
        "p.yaml:7: steps[1].expect[0].ramp: load balancer 'web' (www.shop.example) has no "
        "ramp: its answers move at once (give it ramp: {duration, steps}, docs/steering.md)"
    ]
    wrong = load_plan(PLAN.replace("ramp: eu", "ramp: euw"), "p.yaml")
    assert [str(r) for r in check_against(wrong, live())] == [
        "p.yaml:7: steps[1].expect[0].ramp: no pool 'euw' in the running config "
        '(did you mean "eu"?)'
    ]


def test_the_tolerance_is_the_binomial_interval_or_ten_points_whichever_is_wider() -> None:
    assert z_score(2) == pytest.approx(3.2905, abs=1e-4)  # one judged window: 99.9%
    assert z_score(5) == pytest.approx(3.6623, abs=1e-4)  # four: 99.975% each
    assert tolerance(0.5, 100, 2) == pytest.approx(3.2905 * 0.05, abs=1e-4)  # 16 points
    assert tolerance(0.5, 10_000, 5) == 0.10
    assert tolerance(0.25, 0, 4) == 1.0


@pytest.mark.parametrize(
    ("step", "steps", "answers", "to_pool", "passed", "why"),
    [
        (1, 4, 400, 100, True, ""),
        (2, 4, 400, 230, True, ""),  # 57.5%: within 10 points of 50%
        (2, 4, 400, 250, False, "step 2 of 4: 250/400 answers from eu (62%), expected 50% ± 10"),
        (3, 4, 400, 260, True, ""),  # 65%: 10 points from 75%, on the edge
        (1, 4, 400, 400, False, "every answer already, not 25%: not ramped"),
        (1, 4, 50, 12, False, f"too few to judge (at least {MIN_ANSWERS} needed)"),
        (4, 4, 300, 300, True, ""),
        (4, 4, 300, 299, False, "step 4 of 4: 299/300 answers from eu after the ramp's last"),
        (4, 4, 0, 0, False, "no answers after the ramp's end"),
        # 19 of 20: every answer from the pool by chance (0.95^120 ≈ 0.002) is no finding
        (19, 20, 120, 120, True, ""),
    ],
)
def test_one_step_window(
    step: int, steps: int, answers: int, to_pool: int, passed: bool, why: str
) -> None:
    verdict = judge_step(step, steps, answers, to_pool, "eu")
    assert verdict.passed is passed
    assert why in verdict.why and bool(verdict.why) is not passed


def samples(
    shares: list[float], width: float, per_step: int, seed: int
) -> list[tuple[float, bool]]:
    """Answers asked evenly over each step window, from the pool with the step's share."""
    rng = random.Random(seed)
    return [
        (k * width + (i + 0.5) * width / per_step, rng.random() < share)
        for k, share in enumerate(shares)
        for i in range(per_step)
    ]


def test_a_ramp_that_rises_in_its_steps_passes_and_one_that_moves_at_once_does_not() -> None:
    rising = judge_ramp(samples([0.25, 0.5, 0.75, 1.0], 1.25, 400, seed=1), 0.0, 5.0, 4, "eu")
    assert [s.passed for s in rising] == [True] * 4, [s.why for s in rising]
    # the answers within 0.1 s of a boundary are not judged: 400 × (1.05 / 1.25) per window
    assert [s.answers for s in rising] == [336] * 4
    at_once = judge_ramp(samples([1.0] * 4, 1.25, 400, seed=2), 0.0, 5.0, 4, "eu")
    assert [s.passed for s in at_once] == [False, False, False, True]
    assert "every answer already, not 25%: not ramped" in at_once[0].why
    stuck = judge_ramp(samples([0.25, 0.25, 0.25, 0.25], 1.25, 400, seed=3), 0.0, 5.0, 4, "eu")
    assert [s.passed for s in stuck] == [True, False, False, False]


def test_a_true_ramp_fails_by_chance_about_once_in_a_thousand() -> None:
    """200 seeded true ramps of 5 steps, 250 answers per window: the 99.9% is for the whole
    ramp, so about 0.2 of them fail by chance (and never more than 2)."""
    shares = [0.2, 0.4, 0.6, 0.8, 1.0]
    failed = [
        seed
        for seed in range(200)
        if not all(
            s.passed for s in judge_ramp(samples(shares, 2.0, 250, seed), 0.0, 10.0, 5, "eu")
        )
    ]
    assert len(failed) <= 2, failed


def test_the_verdict_shows_each_steps_share_in_json_and_in_words() -> None:
    verdict = RampVerdict("eu", 5.0, 4, started_s=0.12)
    verdict.shares = judge_ramp(
        samples([0.25, 0.5, 0.75, 1.0], 1.25, 400, seed=1), 0.0, 5.0, 4, "eu"
    )
    doc = verdict.to_json()
    assert doc["steps"] == 4 and doc["started_s"] == 0.12
    assert [s["expected_share"] for s in doc["shares"]] == [0.25, 0.5, 0.75, 1.0]
    measured = [s["measured_share"] for s in doc["shares"]]
    assert measured == sorted(measured) and measured[-1] == 1.0
    assert verdict.summary().startswith("shares from eu per step at dnsd: ")
    assert "(expected 25% 50% 75% 100%; 336/336/336/336 answers)" in verdict.summary()


def test_the_query_rate_aims_at_a_few_hundred_answers_per_step() -> None:
    assert query_rate(5.0, 4) == 320.0  # 1.25 s steps
    assert query_rate(600.0, 5) == 10.0  # 2-minute steps: at least 10 a second, no flood
    assert query_rate(1.0, 10) == 1000.0  # capped
