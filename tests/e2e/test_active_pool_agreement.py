"""The active pool is the truth, everywhere: for a failover (policy off), a geo, a dynamic
and a nested load balancer, through all healthy, a manual failover (trickle 1.0 through the
admin API), a pool forced down and a real probe failure (the backend answers 503), the
status document's active pool per region, the metrics `dnsd_lb_active_pool` and
`dnsd_lb_failed_over`, and what `dig` gets for a client of that region (ECS) all agree —
against a real `python -m dnsd serve` probing real HTTP backends on 127.0.0.x."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from dnsd.drill.backend import DemoBackend
from tests.admin_client import http
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

TOKEN = "agree-token"
POOLS = {"eu": "127.0.0.11", "us": "127.0.0.12", "asia": "127.0.0.13",
         "fast": "127.0.0.14", "slow": "127.0.0.15"}  # fmt: skip
POOL_OF = {address: pool for pool, address in POOLS.items()}
CLIENTS = {"81.2.69.0/24": "WEU", "202.12.27.0/24": "NEAS", "12.0.0.0/24": None}  # None: asked
LBS = ("fo", "geo", "dyn", "nest")
MONITOR = (
    "{type: http, interval: 100ms, timeout: 500ms, healthy_threshold: 1, unhealthy_threshold: 1}"
)


def config(ports: dict[str, int]) -> str:
    pools = "\n".join(
        f"  {name}: {{monitor: m, backends: [{{name: {name}-1, address: {address}, "
        f"port: {ports[name]}}}]}}"
        for name, address in POOLS.items()
    )
    return f"""\
zone: agree.test
soa: {{mname: ns1.agree.test., rname: h.agree.test.}}
records:
  "@": {{NS: ns1.agree.test.}}
  ns1: {{A: 192.0.2.1}}
  fo: {{lb: fo}}
  geo: {{lb: geo}}
  dyn: {{lb: dyn}}
  nest: {{lb: nest}}
monitors:
  m: {MONITOR}
pools:
{pools}
load_balancers:
  fo: {{ttl: 1, steering: "off", default_pools: [eu, us]}}
  geo: {{ttl: 1, steering: geo, default_pools: [us, eu], region_pools: {{WEU: [eu, us], NEAS: [asia, us]}}}}
  dyn: {{ttl: 1, steering: dynamic, default_pools: [slow, fast], min_samples: 1, rtt_max_age: 1h}}
  nest: {{ttl: 1, steering: "off", default_pools: ["lb:geo", asia]}}
"""


def status_view(port: int) -> dict[tuple[str, str], tuple[str, bool]]:
    """(lb, region) → (innermost active pool, failed over), from /api/v1/status."""
    _, doc = http(port, "GET", "/api/v1/status")
    out = {}
    for lb in doc["load_balancers"]:
        for region, chain in lb["active"].items():
            out[(lb["name"], region)] = (chain.split(" -> ")[-1], region in lb["failed_over"])
    return out


def metrics_view(port: int) -> dict[tuple[str, str], tuple[str, bool]]:
    """The same from /metrics (dnsd_lb_active_pool, dnsd_lb_failed_over)."""
    _, text = http(port, "GET", "/metrics")
    active: dict[tuple[str, str], list[str]] = {}
    failed: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.labels.get("lb", ""), s.labels.get("region", ""))
            if s.name == "dnsd_lb_active_pool" and s.value == 1:
                active.setdefault(key, []).append(s.labels["pool"])
            elif s.name == "dnsd_lb_failed_over":
                failed[key] = s.value
    assert all(len(pools) == 1 for pools in active.values()), active  # one answering pool
    assert set(active) == set(failed)
    return {key: (pools[0], failed[key] == 1) for key, pools in active.items()}


def dig(port: int, name: str, subnet: str) -> str:
    """The pool whose backend real `dig` (its default cookie included) gets, as a client
    of `subnet`."""
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), f"+subnet={subnet}", "+short", "+tries=1",
         "+time=2", f"{name}.agree.test", "A"],
        capture_output=True, text=True, timeout=10,
    ).stdout.split()  # fmt: skip
    assert len(out) == 1, out
    return POOL_OF[out[0]]


def wait_for(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


# What answers each client region in each phase: lb → region → (pool, failed over).
HEALTHY = {
    "fo": {"WEU": ("eu", False), "NEAS": ("eu", False), "ENAM": ("eu", False)},
    "geo": {"WEU": ("eu", False), "NEAS": ("asia", False), "ENAM": ("us", False)},
    "dyn": {"WEU": ("fast", False), "NEAS": ("fast", False), "ENAM": ("fast", False)},
    "nest": {"WEU": ("eu", False), "NEAS": ("asia", False), "ENAM": ("us", False)},
}
MANUAL = {  # trickle 1.0 on fo, geo and dyn: every region on its backup (nest through geo)
    "fo": {"WEU": ("us", True), "NEAS": ("us", True), "ENAM": ("us", True)},
    "geo": {"WEU": ("us", True), "NEAS": ("us", True), "ENAM": ("eu", True)},
    "dyn": {"WEU": ("slow", True), "NEAS": ("slow", True), "ENAM": ("slow", True)},
    "nest": {"WEU": ("us", True), "NEAS": ("us", True), "ENAM": ("eu", True)},
}
EU_DOWN = {  # pool eu forced down by an override
    "fo": {"WEU": ("us", True), "NEAS": ("us", True), "ENAM": ("us", True)},
    "geo": {"WEU": ("us", True), "NEAS": ("asia", False), "ENAM": ("us", False)},
    "dyn": HEALTHY["dyn"],
    "nest": {"WEU": ("us", True), "NEAS": ("asia", False), "ENAM": ("us", False)},
}
PROBE_FAILED = {  # eu's and fast's backends answer 503: the probes take them out
    **EU_DOWN,
    "dyn": {"WEU": ("slow", True), "NEAS": ("slow", True), "ENAM": ("slow", True)},
}


def test_status_metrics_and_dig_agree_on_the_active_pool(tmp_path: Path) -> None:
    loop = LoopThread()
    backends = {name: DemoBackend(name, host=address, control_port=None)
                for name, address in POOLS.items()}  # fmt: skip
    try:
        for backend in backends.values():
            loop.call(backend.start())
        # slow answers 40 ms late: dynamic steering ranks fast first, every time
        loop.call(backends["slow"].set_mode("slow", slow_ms=40))
        (tmp_path / "agree.yaml").write_text(config({n: b.port for n, b in backends.items()}))
        started = time.monotonic()
        with DnsdProcess(tmp_path, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
            api = dnsd.admin_port
            regions = dict(CLIENTS)
            for subnet in regions:  # where the geo database puts each client
                _, body = http(api, "GET", f"/api/v1/explain?name=fo.agree.test&client="
                               f"{subnet.split('/')[0]}&ecs={subnet}")  # fmt: skip
                regions[subnet] = body["region"]
            assert regions["81.2.69.0/24"] == "WEU" and regions["202.12.27.0/24"] == "NEAS"
            assert regions["12.0.0.0/24"] == "ENAM"

            def check(phase: str, expected: dict[str, dict[str, tuple[str, bool]]]) -> None:
                wanted = {(lb, r): v for lb, table in expected.items() for r, v in table.items()}
                wait_for(
                    lambda: all(status_view(api).get(k) == v for k, v in wanted.items()),
                    f"{phase}: status {status_view(api)}",
                )
                status, metrics = status_view(api), metrics_view(api)
                assert status == metrics, phase  # every lb, every region (14 of them)
                for subnet, region in regions.items():
                    for lb in LBS:
                        got = dig(dnsd.port, lb, subnet)
                        assert got == status[(lb, region)][0] == expected[lb][region][0], (
                            phase, lb, region, got,
                        )  # fmt: skip

            check("all healthy", HEALTHY)
            for lb in ("fo", "geo", "dyn"):
                put = http(api, "PUT", f"/api/v1/overrides/load_balancers/{lb}",
                           {"trickle_ratio": 1.0, "for": "10m"}, TOKEN)  # fmt: skip
                assert put[0] == 200, put
            check("trickle 1.0", MANUAL)
            for lb in ("fo", "geo", "dyn"):
                http(api, "DELETE", f"/api/v1/overrides/load_balancers/{lb}", token=TOKEN)
            down = http(api, "PUT", "/api/v1/overrides/pools/eu", {"state": "down"}, TOKEN)
            assert down[0] == 200, down
            check("pool eu down", EU_DOWN)
            http(api, "DELETE", "/api/v1/overrides/pools/eu", token=TOKEN)
            check("overrides removed", HEALTHY)
            loop.call(backends["eu"].set_mode("503"))
            loop.call(backends["fast"].set_mode("503"))
            check("probes fail", PROBE_FAILED)
            loop.call(backends["eu"].set_mode("ok"))
            loop.call(backends["fast"].set_mode("ok"))
            check("recovered", HEALTHY)
        assert time.monotonic() - started < 60
    finally:
        for backend in backends.values():
            loop.call(backend.stop())
        loop.close()
