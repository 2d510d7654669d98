"""`dnsd_lb_failed_over_by_health` from a real `python -m dnsd serve` probing real HTTP
backends on 127.0.0.x: a pool set down by an override and a manual failover (trickle 1.0)
move every client region off its first choice (`dnsd_lb_failed_over` says so) but are
planned work — 0, also while the overridden pool's backend fails its probes behind the
override (the maintenance itself); the same backend failing with no override is an
incident — every region counts, at once — and the count is back to 0 when it recovers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from dnsd.drill.backend import DemoBackend
from dnsd.geo.regions import REGIONS
from tests.admin_client import http
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess
from tests.waiting import until

TOKEN = "by-health-token"
POOLS = {"eu": "127.0.0.21", "us": "127.0.0.22"}
EVERY_REGION = len(REGIONS) + 1  # and clients nothing places


def config(ports: dict[str, int]) -> str:
    pools = "\n".join(
        f"  {name}: {{monitor: m, backends: [{{name: {name}-1, address: {address}, "
        f"port: {ports[name]}}}]}}"
        for name, address in POOLS.items()
    )
    return f"""\
zone: health.test
soa: {{mname: ns1.health.test., rname: h.health.test.}}
records:
  "@": {{NS: ns1.health.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
  api: {{lb: api}}
monitors:
  m: {{type: http, interval: 100ms, timeout: 500ms, healthy_threshold: 1, unhealthy_threshold: 1}}
pools:
{pools}
load_balancers:
  web: {{ttl: 1, steering: "off", default_pools: [eu, us]}}
  api: {{ttl: 1, steering: geo, default_pools: [us, eu], region_pools: {{WEU: [eu, us]}}}}
"""


def scrape(port: int) -> dict[str, tuple[float, float]]:
    """Per load balancer: (regions off their first choice, of them by health)."""
    _, text = http(port, "GET", "/metrics")
    off: dict[str, float] = {}
    by_health: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "dnsd_lb_failed_over":
                off[s.labels["lb"]] = off.get(s.labels["lb"], 0.0) + s.value
            elif s.name == "dnsd_lb_failed_over_by_health":
                by_health[s.labels["lb"]] = s.value
    assert set(off) == set(by_health) == {"web", "api"}, (off, by_health)
    return {lb: (off[lb], by_health[lb]) for lb in off}


def wait_for(check: Callable[[], bool], what: Callable[[], object], timeout: float = 10.0) -> float:
    return until(check, timeout, what)


def test_planned_failovers_are_not_by_health_a_probe_failure_is(tmp_path: Path) -> None:
    loop = LoopThread()
    backends = {name: DemoBackend(name, host=address, control_port=None)
                for name, address in POOLS.items()}  # fmt: skip
    try:
        for backend in backends.values():
            loop.call(backend.start())
        (tmp_path / "health.yaml").write_text(config({n: b.port for n, b in backends.items()}))
        with DnsdProcess(tmp_path, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
            api = dnsd.admin_port

            def expect(wanted: dict[str, tuple[float, float]], phase: str) -> float:
                return wait_for(lambda: scrape(api) == wanted, lambda: (phase, scrape(api)))

            healthy = {"web": (0.0, 0.0), "api": (0.0, 0.0)}
            expect(healthy, "all healthy")

            # planned: eu set down; web moves every region, api its WEU clients
            put = http(api, "PUT", "/api/v1/overrides/pools/eu",
                       {"state": "down", "reason": "maintenance", "for": "10m"}, TOKEN)  # fmt: skip
            assert put[0] == 200, put
            expect({"web": (EVERY_REGION, 0.0), "api": (1.0, 0.0)}, "eu set down")
            # the maintenance: eu's server stopped behind the override, still planned
            loop.call(backends["eu"].set_mode("503"))

            def eu_probed() -> str:
                pools = http(api, "GET", "/api/v1/status?pool=eu")[1]["pools"]
                return str(next(p for p in pools if p["name"] == "eu")["backends"][0]["probed"])

            wait_for(lambda: eu_probed() == "unhealthy", eu_probed)
            assert scrape(api) == {"web": (EVERY_REGION, 0.0), "api": (1.0, 0.0)}

            # the override goes, eu still fails: now health is why, for every region at once
            http(api, "DELETE", "/api/v1/overrides/pools/eu", token=TOKEN)
            took = expect(
                {"web": (EVERY_REGION, EVERY_REGION), "api": (1.0, 1.0)}, "eu fails, no override"
            )
            assert took < 2.0, took
            loop.call(backends["eu"].set_mode("ok"))
            expect(healthy, "eu recovered")

            # a manual failover (trickle 1.0 on web) is planned work too
            put = http(api, "PUT", "/api/v1/overrides/load_balancers/web",
                       {"trickle_ratio": 1.0, "for": "10m"}, TOKEN)  # fmt: skip
            assert put[0] == 200, put
            expect({"web": (EVERY_REGION, 0.0), "api": (0.0, 0.0)}, "manual failover")
            # while us, where web was moved, fails: web's regions go back to eu (their
            # first choice), api's non-WEU regions leave us by health
            loop.call(backends["us"].set_mode("503"))
            expect(
                {"web": (0.0, 0.0), "api": (EVERY_REGION - 1, EVERY_REGION - 1)},
                "us fails under web's manual failover",
            )
    finally:
        for backend in backends.values():
            loop.call(backend.stop())
        loop.close()
