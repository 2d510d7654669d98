"""Drill plans (dnsd.drill.plan): validation with file:line and hints, checks against the
live config, and the bounds computed from monitors and TTLs."""

from __future__ import annotations

import pytest

from dnsd.drill.plan import (
    Expectation,
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

MINIMAL = """\
name: eu outage rehearsal
server: http://127.0.0.1:8053
dns: 127.0.0.1:53
resolvers: [127.0.0.1:5300]
vantage: {eu: 85.214.0.0/24, us: 8.8.8.0/24}
steps:
  - fault: {pool: eu}
    expect: [{name: www.shop.example, from: eu, pool: us, within: bound}]
  - restore: true
    expect: [{name: www.shop.example, from: eu, pool: eu, within: failback_bound}]
"""

WEB = MonitorTiming(interval_s=10.0, timeout_s=5.0, healthy_threshold=3, unhealthy_threshold=2)
FAST = MonitorTiming(interval_s=1.0, timeout_s=0.5, healthy_threshold=2, unhealthy_threshold=2)


def live() -> LiveConfig:
    return LiveConfig(
        pools={"eu": {"eu-1": "192.0.2.1", "eu-2": "192.0.2.2"}, "us": {"us-1": "198.51.100.1"}},
        timing={"eu": WEB, "us": FAST},
        lbs={"web"},
        names={
            ("www.shop.example", "eu"): NameInfo("web", 30.0, ("eu", "us")),
            ("www.shop.example", "us"): NameInfo("web", 30.0, ("us", "eu")),
        },
    )


def test_the_minimal_plan_of_the_manual_loads_and_fits() -> None:
    plan = load_plan(MINIMAL, "plan.yaml")
    assert [s.name for s in plan.steps] == ["pool eu down", "restore"]
    assert plan.steps[0].fault is not None and plan.steps[0].fault.pool == "eu"
    assert plan.vantage == {"eu": "85.214.0.0/24", "us": "8.8.8.0/24"}
    assert check_against(plan, live()) == []


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            "  - fault: {pool: eu}\n    expekt: []\n",
            'plan.yaml:8: steps[0].expekt: unknown key (did you mean "expect"?)',
        ),
        (
            "  - fault: {pool: eu, backend: eu/eu-1}\n",
            "plan.yaml:7: steps[0].fault: a fault is one of pool, backend, trickle or command",
        ),
        (
            "  - fault: {command: 'systemctl stop x'}\n",
            'plan.yaml:7: steps[0].fault: a command fault needs "restore"',
        ),
        (
            "  - fault: {backend: eu-1}\n",
            "plan.yaml:7: steps[0].fault.backend: expected POOL/BACKEND, got 'eu-1'",
        ),
        (
            "  - fault: {pool: eu, restore: 'x'}\n",
            "plan.yaml:7: steps[0].fault.restore: restore goes with command",
        ),
        (
            "  - fault: {trickle: {lb: web, ratio: 1.5}}\n",
            "plan.yaml:7: steps[0].fault.trickle.ratio: must be between 0.0 and 1.0, got 1.5",
        ),
        (
            "  - expect: [{name: a.example, from: asia, pool: us}]\n",
            "plan.yaml:7: steps[0].expect[0].from: no vantage point 'asia'",
        ),
        (
            "  - expect: [{name: a.example, from: eu, pool: us, within: bund}]\n",
            'steps[0].expect[0].within: bound, failback_bound or seconds (did you mean "bound"?)',
        ),
        (
            "  - expect: [{name: a.example, pool: us, address: 192.0.2.1}]\n",
            "plan.yaml:7: steps[0].expect[0]: an expectation names one of pool, backend, address or ramp",
        ),
        (
            "  - fault: {pool: eu}\n    restore: true\n",
            "plan.yaml:8: steps[0]: a step injects a fault or restores, not both",
        ),
    ],
)
def test_a_bad_plan_is_refused_with_file_line_and_a_hint(steps: str, expected: str) -> None:
    text = MINIMAL.split("steps:\n")[0] + "steps:\n" + steps
    with pytest.raises(PlanError) as caught:
        load_plan(text, "plan.yaml")
    assert any(expected in str(r) for r in caught.value.reasons), caught.value


def test_every_problem_is_reported_at_once() -> None:
    text = "naem: x\nsteps: nope\nvantage: {eu: not-a-subnet}\n"
    with pytest.raises(PlanError) as caught:
        load_plan(text, "p.yaml")
    reasons = [str(r) for r in caught.value.reasons]
    assert 'p.yaml:1: naem: unknown key (did you mean "name"?)' in reasons
    assert "p.yaml:2: steps: expected a list of steps" in reasons
    assert any(r.startswith("p.yaml:3: vantage.eu: expected a client subnet") for r in reasons)


def test_names_pools_and_backends_are_checked_against_the_live_config() -> None:
    text = MINIMAL.replace("{pool: eu}", "{pool: euu}").replace(
        "pool: us, within", "pool: usa, within"
    )
    text += "  - fault: {backend: eu/eu-3}\n    expect: [{name: api.shop.example, pool: eu}]\n"
    text += "  - fault: {trickle: {lb: webb, ratio: 1.0}}\n"
    text += "  - fault: {command: 'true', restore: 'true', breaks: [eu/eu-9, asia]}\n"
    reasons = [str(r) for r in check_against(load_plan(text, "p.yaml"), live())]
    assert reasons == [
        """p.yaml:7: steps[0].fault.pool: no pool 'euu' in the running config (did you mean "eu"?)""",
        """p.yaml:8: steps[0].expect[0].pool: no pool 'usa' in the running config (did you mean "us"?)""",
        """p.yaml:11: steps[2].fault.backend: no backend 'eu-3' in pool 'eu' (did you mean "eu-2"?)""",
        "p.yaml:12: steps[2].expect[0].name: 'api.shop.example' is not a load-balanced name of the running config",
        """p.yaml:13: steps[3].fault.trickle.lb: no load balancer 'webb' (did you mean "web"?)""",
        "p.yaml:14: steps[4].fault.breaks: no backend 'eu-9' in pool 'eu'",
        "p.yaml:14: steps[4].fault.breaks: no pool 'asia' in the running config",
    ]


def test_bounds_come_from_the_slowest_monitor_involved_and_the_ttl() -> None:
    plan = load_plan(MINIMAL, "p.yaml")
    failover = bound_for(plan.steps[0].expect[0], live())
    # interval × unhealthy_threshold + timeout + TTL, of eu's monitor (the slower)
    assert failover.seconds == 10.0 * 2 + 5.0 + 30.0
    assert failover.formula == "10s × 2 + 5s + TTL 30s"
    failback = bound_for(plan.steps[1].expect[0], live())
    assert failback.seconds == 10.0 * 3 + 5.0 + 30.0  # healthy_threshold for the way back
    given = Expectation("www.shop.example", "eu", 1, pools=("us",), within=4.5)
    assert bound_for(given, live()).seconds == 4.5
    unmonitored = live()
    unmonitored.timing = {"eu": None, "us": None}
    assert bound_for(plan.steps[0].expect[0], unmonitored).formula == "TTL 30s (no monitor)"


def test_overrides_live_as_long_as_the_drill_can_take_unless_the_plan_says() -> None:
    plan = load_plan(MINIMAL, "p.yaml")
    bounds = {(1, 0): bound_for(plan.steps[0].expect[0], live()),
              (2, 0): bound_for(plan.steps[1].expect[0], live())}  # fmt: skip
    assert fault_for_s(plan, bounds) == (55.0 + 5.0) + (65.0 + 5.0) + 60.0
    short = load_plan(MINIMAL.replace("steps:", "fault_for: 20s\nsteps:"), "p.yaml")
    assert fault_for_s(short, bounds) == 20.0


def test_what_an_answer_must_be() -> None:
    any_of = Expectation("w", None, 1, pools=("eu", "us"))
    assert expected_addresses(any_of, live()) == {"192.0.2.1", "192.0.2.2", "198.51.100.1"}
    one = Expectation("w", None, 1, backend=("eu", "eu-2"))
    assert expected_addresses(one, live()) == {"192.0.2.2"}
