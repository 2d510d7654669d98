"""`dnsd_lb_failed_over_by_health` (dnsd.admin.status.health_failed_under): the regions off
their first choice because of health, not planned work — a pool forced down, a drain or a
manual failover (trickle 1.0, overridden or configured) is none, nor are the backends behind
it failing their probes (the maintenance itself); a probe failure is one, also while an
override is in force that alone would not explain it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dnsd.admin.status import health_failed_under, region_details_under
from dnsd.config.loader import load_config
from dnsd.geo.regions import REGIONS
from dnsd.health.view import BackendHealth, HealthView, view_of
from dnsd.snapshot import compile_snapshot

ALL = {*REGIONS, "unknown"}
UP = BackendHealth(healthy=True, probed="healthy")
FAILING = BackendHealth(healthy=False, probed="unhealthy")


def snapshot(tmp_path: Path, trickle: str = "") -> object:
    (tmp_path / "z.yaml").write_text(f"""\
zone: z.test
soa: {{mname: ns1.z.test., rname: h.z.test.}}
records:
  "@": {{NS: ns1.z.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
pools:
  eu: {{backends: [{{name: eu-1, address: 192.0.2.11}}, {{name: eu-2, address: 192.0.2.12}},
                  {{name: eu-3, address: 192.0.2.13}}], minimum_origins: 2}}
  us: {{backends: [{{name: us-1, address: 192.0.2.21}}]}}
  asia: {{backends: [{{name: asia-1, address: 192.0.2.31}}]}}
load_balancers:
  web: {{ttl: 30, default_pools: [eu, us, asia]{trickle}}}
""")
    config, _ = load_config(tmp_path)
    return compile_snapshot(config, 1)


def states(
    eu1: BackendHealth = UP,
    eu2: BackendHealth = UP,
    eu3: BackendHealth = UP,
    us: BackendHealth = UP,
) -> dict[tuple[str, str], object]:
    return {("eu", "eu-1"): eu1, ("eu", "eu-2"): eu2, ("eu", "eu-3"): eu3, ("us", "us-1"): us,
            ("asia", "asia-1"): UP}  # fmt: skip


DRAINED = BackendHealth(True, "healthy", "drain")
DRAINED_FAILING = BackendHealth(False, "unhealthy", "drain")


GENERATION = iter(range(1, 1_000_000))


def view(**kwargs: object) -> HealthView:
    return view_of(generation=next(GENERATION), **kwargs)  # type: ignore[arg-type]


CASES = {
    # name: (view, regions off the first choice, of them by health)
    "all healthy": (lambda: view(states=states()), set(), set()),
    "a probe failure": (lambda: view(states=states(eu1=FAILING, eu2=FAILING)), ALL, ALL),
    "pool forced down": (lambda: view(states=states(), pools={"eu": "down"}), ALL, set()),
    "backends forced down": (
        lambda: view(states=states(eu1=BackendHealth(False, "healthy", "down"),
                                   eu2=BackendHealth(False, "healthy", "down"))), ALL, set(),
    ),
    "backends drained": (lambda: view(states=states(eu2=DRAINED, eu3=DRAINED)), ALL, set()),
    "manual failover": (lambda: view(states=states(), trickle={"web": 1.0}), ALL, set()),
    # the maintenance itself: the drained backends stopped, then fail their probes
    "drained backends failing": (
        lambda: view(states=states(eu2=DRAINED_FAILING, eu3=DRAINED_FAILING)), ALL, set(),
    ),
    "a pool forced down failing": (
        lambda: view(states=states(FAILING, FAILING, FAILING), pools={"eu": "down"}), ALL, set(),
    ),
    "a manual failover's pool failing": (
        lambda: view(states=states(FAILING, FAILING, FAILING), trickle={"web": 1.0}), ALL, set(),
    ),
    # failures the planned work does not explain
    "the rest of a pool failing beside a drain": (
        lambda: view(states=states(eu1=FAILING, eu3=DRAINED)), ALL, ALL,
    ),
    "the pool traffic was moved to failing": (
        lambda: view(states=states(us=FAILING), pools={"eu": "down"}), ALL, ALL,
    ),
    "a probe failure overridden up": (
        lambda: view(states=states(BackendHealth(True, "unhealthy", "up"),
                                   BackendHealth(True, "unhealthy", "up"))), set(), set(),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_only_health_counts(tmp_path: Path, case: str) -> None:
    snap = snapshot(tmp_path)
    make, off_first, by_health = CASES[case]
    the_view = make()
    lb = snap.config.load_balancers["web"]  # type: ignore[attr-defined]
    now = time.time()
    assert set(region_details_under(snap, the_view, lb, now)[1]) == off_first
    assert set(health_failed_under(snap, the_view, lb, now)) == by_health


def test_a_configured_manual_failover_is_planned_too(tmp_path: Path) -> None:
    snap = snapshot(tmp_path, ", trickle_ratio: 1.0")
    lb = snap.config.load_balancers["web"]  # type: ignore[attr-defined]
    healthy = view(states=states())
    failing = view(states=states(eu1=FAILING, eu2=FAILING))
    assert set(region_details_under(snap, healthy, lb, time.time())[1]) == ALL
    assert set(health_failed_under(snap, healthy, lb, time.time())) == set()
    assert set(region_details_under(snap, failing, lb, time.time())[1]) == ALL
    assert set(health_failed_under(snap, failing, lb, time.time())) == set()
