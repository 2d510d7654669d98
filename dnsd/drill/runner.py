"""Failover drills (docs/drills.md): inject a fault, poll dnsd and a resolver every 100 ms,
and measure how answers move against the bounds.

* detect   = first time dnsd's own answer leaves the failed backends, after the fault;
             must be ≤ interval × unhealthy_threshold + timeout (+ slack);
* client   = the same through the resolver; ≤ TTL + interval × unhealthy_threshold +
             timeout (+ slack), and never before dnsd's own answer changed;
* failback = after the fault is removed, the first time the resolver answers with them
             again; ≤ TTL + interval × healthy_threshold + timeout (+ slack);
* lost     = queries that timed out (after one retry, like dig) or got SERVFAIL: must be 0.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from dnsd.drill.config import ADDRESS, MAINTENANCE, POOLS, SCENARIOS, ZONE, addresses
from dnsd.drill.dnsclient import Answer, DnsClient
from dnsd.drill.environment import Environment

POLL_S = 0.1
DETECT_SLACK_S = 0.5
CLIENT_SLACK_S = 1.0
NAMES = {address: name for name, address in ADDRESS.items()} | {MAINTENANCE: "sorry"}


def label(addrs: tuple[str, ...]) -> str:
    return " ".join(NAMES.get(a, a) for a in addrs) or "-"


@dataclass
class DrillResult:
    scenario: str
    ttl_s: float
    interval_s: float
    unhealthy_threshold: int
    bound_s: float
    detect_s: float | None = None
    client_s: float | None = None
    failback_s: float | None = None
    queries: int = 0
    lost: int = 0
    passed: bool = False
    checks: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    fault_at: float | None = None
    recovered_at: float | None = None
    timeline: list[tuple[str, Answer]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "ttl_s": self.ttl_s,
            "interval_s": self.interval_s,
            "unhealthy_threshold": self.unhealthy_threshold,
            "bound_s": round(self.bound_s, 3),
            "detect_s": _round(self.detect_s),
            "client_s": _round(self.client_s),
            "failback_s": _round(self.failback_s),
            "queries": self.queries,
            "lost": self.lost,
            "passed": self.passed,
            "checks": self.checks,
            "notes": self.notes,
            "fault_at": _round(self.fault_at),
            "recovered_at": _round(self.recovered_at),
            "timeline": timeline_json(self.timeline),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


class Poller:
    """Polls one name through dnsd and the resolver every 100 ms (direct first)."""

    def __init__(
        self, env: Environment, qname: str, progress: bool, scenario: str, period_s: float = POLL_S
    ) -> None:
        self.env, self.qname, self.progress, self.scenario = env, qname, progress, scenario
        self.period_s = period_s
        self.start = time.monotonic()
        self.timeline: list[tuple[str, Answer]] = []
        self._task: asyncio.Task[None] | None = None
        self._clients: list[tuple[str, DnsClient]] = []

    def now(self) -> float:
        return time.monotonic() - self.start

    def last(self, lane: str) -> Answer | None:
        for name, answer in reversed(self.timeline):
            if name == lane:
                return answer
        return None

    async def __aenter__(self) -> Poller:
        self._clients.append(("dnsd", await DnsClient(*self.env.dns).open()))
        if self.env.resolver is not None:
            self._clients.append(("resolver", await DnsClient(*self.env.resolver).open()))
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        tick = 0
        while True:
            for lane, client in self._clients:
                self.timeline.append((lane, await client.query(self.qname, self.now())))
            tick += 1
            if self.progress and tick % 5 == 0:
                direct = self.last("dnsd")
                via = self.last("resolver")
                line = f"\r[{self.scenario}] t={self.now():5.1f}s  dnsd: {label(direct.addresses) if direct else '?':<16}"
                if via is not None:
                    line += f"  resolver: {label(via.addresses):<16}"
                print(line, end="", file=sys.stderr, flush=True)
            await asyncio.sleep(max(0.0, self.start + tick * self.period_s - time.monotonic()))

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for _, client in self._clients:
            client.close()
        if self.progress:
            print(file=sys.stderr)

    async def until(
        self, lane: str, predicate: Callable[[tuple[str, ...]], bool], timeout_s: float
    ) -> bool:
        deadline = time.monotonic() + timeout_s
        mark = len(self.timeline)
        while time.monotonic() < deadline:
            for name, answer in self.timeline[mark:]:
                if name == lane and not answer.lost and predicate(answer.addresses):
                    return True
            await asyncio.sleep(0.02)
        return False


def first_after(
    timeline: list[tuple[str, Answer]],
    lane: str,
    after: float,
    predicate: Callable[[tuple[str, ...]], bool],
) -> float | None:
    for name, answer in timeline:
        if name == lane and answer.at >= after and not answer.lost and predicate(answer.addresses):
            return answer.at - after
    return None


class Drill:
    def __init__(self, env: Environment, progress: bool = True) -> None:
        self.env = env
        self.progress = progress
        self.client_lane = "resolver" if env.resolver is not None else "dnsd"

    def result(self, scenario: str) -> DrillResult:
        t = self.env.timing
        return DrillResult(scenario, t.ttl_s, t.interval_s, t.unhealthy_threshold, t.bound_s)

    async def run(self, scenario: str) -> DrillResult:
        method = getattr(self, "scenario_" + scenario.replace("-", "_"), None)
        if method is None:
            raise ValueError(f"unknown scenario {scenario!r}: one of {', '.join(SCENARIOS)}")
        result: DrillResult = await method()
        result.queries = len(result.timeline)
        result.lost = sum(1 for _, a in result.timeline if a.lost)
        result.checks["no lost queries"] = result.lost == 0
        result.passed = all(result.checks.values())
        return result

    # -- the shared shape of a fault drill ----------------------------------------------------
    async def fault_drill(
        self,
        scenario: str,
        qname: str,
        dead: frozenset[str],
        inject: Callable[[], Awaitable[None]],
        recover: Callable[[], Awaitable[None]],
        detect_bound_s: float,
        during: Callable[[Poller, DrillResult], Awaitable[None]] | None = None,
        moved_to: Callable[[tuple[str, ...]], bool] | None = None,
    ) -> DrillResult:
        t = self.env.timing
        result = self.result(scenario)
        gone = lambda addrs: bool(addrs) and not (set(addrs) & dead)  # noqa: E731
        back = lambda addrs: bool(set(addrs) & dead)  # noqa: E731
        async with Poller(self.env, qname, self.progress, scenario) as poller:
            if not await poller.until(self.client_lane, back, 10.0):
                result.notes.append("the backends to break were not being served before the fault")
                result.checks["served before the fault"] = False
            await asyncio.sleep(0.5)
            result.fault_at = poller.now()
            await inject()
            moved = await poller.until(self.client_lane, gone, t.bound_s + 5.0)
            result.checks["answers left the failed backends"] = moved
            await asyncio.sleep(1.0)
            if during is not None:
                await during(poller, result)
            if moved_to is not None:
                last = poller.last(self.client_lane)
                result.checks["answers went where expected"] = last is not None and moved_to(
                    last.addresses
                )
            result.recovered_at = poller.now()
            await recover()
            came_back = await poller.until(self.client_lane, back, t.failback_bound_s + 5.0)
            result.checks["answers came back"] = came_back
            await asyncio.sleep(0.3)
        result.timeline = poller.timeline
        result.detect_s = first_after(result.timeline, "dnsd", result.fault_at, gone)
        result.client_s = first_after(result.timeline, self.client_lane, result.fault_at, gone)
        result.failback_s = first_after(
            result.timeline, self.client_lane, result.recovered_at, back
        )
        slack_bound = t.ttl_s + detect_bound_s
        result.bound_s = slack_bound
        result.checks["detect within interval × threshold + timeout"] = (
            result.detect_s is not None and result.detect_s <= detect_bound_s + DETECT_SLACK_S
        )
        result.checks["client within TTL + detect bound"] = (
            result.client_s is not None and result.client_s <= slack_bound + CLIENT_SLACK_S
        )
        result.checks["client not before dnsd"] = (
            result.client_s is not None
            and result.detect_s is not None
            and result.client_s >= result.detect_s
        )
        result.checks["failback within TTL + interval × healthy_threshold + timeout"] = (
            result.failback_s is not None
            and result.failback_s <= t.failback_bound_s + CLIENT_SLACK_S
        )
        return result

    async def set_modes(self, names: list[str], mode: str) -> None:
        for name in names:
            await self.env.set_mode(name, mode)

    def _needs_backends(self, scenario: str) -> None:
        if not self.env.can_break_backends:
            raise ValueError(
                f"{scenario} breaks demo backends: run it in a box (no --server) or give --control"
            )

    # -- scenarios ---------------------------------------------------------------------------
    async def scenario_primary_down(self) -> DrillResult:
        if not self.env.can_break_backends:  # a deployment: the admin API takes the pool down
            pool = "primary"
            return await self.fault_drill(
                "primary-down",
                f"www.{ZONE}",
                addresses(*POOLS["primary"]),
                lambda: self._admin_ok("PUT", f"/api/v1/overrides/pools/{pool}", {"state": "down"}),
                lambda: self._admin_ok("DELETE", f"/api/v1/overrides/pools/{pool}"),
                detect_bound_s=0.0,
            )
        return await self.fault_drill(
            "primary-down",
            f"www.{ZONE}",
            addresses(*POOLS["primary"]),
            lambda: self.set_modes(POOLS["primary"], "503"),
            lambda: self.set_modes(POOLS["primary"], "ok"),
            detect_bound_s=self.env.timing.detect_bound_s,
            moved_to=lambda a: set(a) <= addresses(*POOLS["secondary"]),
        )

    async def scenario_backend_down(self) -> DrillResult:
        self._needs_backends("backend-down")
        # zone-a has za1, za2; with za1 down 1/2 = 0.5 < spillover 0.6: the client spills
        return await self.fault_drill(
            "backend-down",
            f"zonal.{ZONE}",
            addresses("za1"),
            lambda: self.set_modes(["za1"], "503"),
            lambda: self.set_modes(["za1"], "ok"),
            detect_bound_s=self.env.timing.detect_bound_s,
            moved_to=lambda a: set(a) == addresses("za2", "zb1", "zb2"),
        )

    async def scenario_zone_down(self) -> DrillResult:
        self._needs_backends("zone-down")

        async def stay_check(poller: Poller, result: DrillResult) -> None:
            stay = await DnsClient(*self.env.dns).open()
            try:
                answer = await stay.query(f"stay.{ZONE}", poller.now())
            finally:
                stay.close()
            ok = set(answer.addresses) == addresses("za1", "za2")
            result.checks["STAY_WITHIN_ZONE keeps answering the (down) zone-a backends"] = ok
            result.notes.append(f"stay.{ZONE} during the outage: {label(answer.addresses)}")

        return await self.fault_drill(
            "zone-down",
            f"zonal.{ZONE}",
            addresses("za1", "za2"),
            lambda: self.set_modes(["za1", "za2"], "refused"),
            lambda: self.set_modes(["za1", "za2"], "ok"),
            detect_bound_s=self.env.timing.detect_bound_s,
            during=stay_check,
            moved_to=lambda a: set(a) == addresses("zb1", "zb2"),
        )

    async def scenario_region_down(self) -> DrillResult:
        self._needs_backends("region-down")
        # clients on loopback are in WEU (--pop-region WEU): eu answers until it hangs
        return await self.fault_drill(
            "region-down",
            f"geo.{ZONE}",
            addresses("e1"),
            lambda: self.set_modes(["e1"], "blackhole"),
            lambda: self.set_modes(["e1"], "ok"),
            detect_bound_s=self.env.timing.detect_bound_s,
            moved_to=lambda a: set(a) == addresses("u1"),
        )

    async def scenario_all_down(self) -> DrillResult:
        self._needs_backends("all-down")
        everything = POOLS["primary"] + POOLS["secondary"]
        return await self.fault_drill(
            "all-down",
            f"www.{ZONE}",
            addresses(*everything),
            lambda: self.set_modes(everything, "503"),
            lambda: self.set_modes(everything, "ok"),
            detect_bound_s=self.env.timing.detect_bound_s,
            moved_to=lambda a: set(a) == {MAINTENANCE},
        )

    async def scenario_manual_failover(self) -> DrillResult:
        return await self.fault_drill(
            "manual-failover",
            f"www.{ZONE}",
            addresses(*POOLS["primary"]),
            lambda: self._admin_ok(
                "PUT", "/api/v1/overrides/load_balancers/www", {"trickle_ratio": 1.0}
            ),
            lambda: self._admin_ok("DELETE", "/api/v1/overrides/load_balancers/www"),
            detect_bound_s=0.0,
            moved_to=lambda a: set(a) <= addresses(*POOLS["secondary"]),
        )

    async def scenario_trickle(self, queries: int = 2000) -> DrillResult:
        result = self.result("trickle")
        client = await DnsClient(*self.env.dns).open()
        start = time.monotonic()
        secondary = addresses(*POOLS["secondary"])
        try:
            for _ in range(queries):
                answer = await client.query(f"trickle.{ZONE}", time.monotonic() - start)
                result.timeline.append(("dnsd", answer))
        finally:
            client.close()
        hits = sum(1 for _, a in result.timeline if set(a.addresses) & secondary)
        p = 0.1
        half = 3.2905 * math.sqrt(queries * p * (1 - p))
        result.notes.append(
            f"{hits}/{queries} = {hits / queries:.3f} of answers from the backup (trickle_ratio 0.1)"
        )
        result.checks["share within the binomial 99.9% interval"] = abs(hits - queries * p) <= half
        return result

    async def scenario_flap(self, seconds: float = 6.0, period_s: float = 0.3) -> DrillResult:
        self._needs_backends("flap")
        t = self.env.timing
        result = self.result("flap")
        async with Poller(self.env, f"www.{ZONE}", self.progress, "flap") as poller:
            await asyncio.sleep(1.0)
            result.fault_at = poller.now()
            mode, end = "503", time.monotonic() + seconds
            while time.monotonic() < end:
                await self.set_modes(POOLS["primary"], mode)
                mode = "ok" if mode == "503" else "503"
                await asyncio.sleep(period_s)
            result.recovered_at = poller.now()
            await self.set_modes(POOLS["primary"], "ok")
            await poller.until(
                self.client_lane, lambda a: bool(set(a) & addresses(*POOLS["primary"])), 10.0
            )
        result.timeline = poller.timeline
        direct = [
            a.addresses
            for lane, a in result.timeline
            if lane == "dnsd" and result.fault_at <= a.at <= result.recovered_at
        ]
        changes = sum(1 for x, y in itertools.pairwise(direct) if x != y)
        # Each change of dnsd's answer needs a health transition of one of the flapping
        # backends, and each backend's transitions are at least min(thresholds) probes (one
        # interval apart) from each other.
        per_backend = math.ceil(
            seconds / (t.interval_s * min(t.healthy_threshold, t.unhealthy_threshold))
        )
        allowed = len(POOLS["primary"]) * per_backend + 1
        result.notes.append(
            f"dnsd's answer changed {changes} times in {seconds:.0f}s of flapping every {period_s}s (at most {allowed} allowed)"
        )
        result.checks["answers flap no faster than the thresholds allow"] = changes <= allowed
        return result

    async def scenario_restart(self) -> DrillResult:
        if not self.env.can_restart:
            raise ValueError("restart needs the in-box mode (no --server)")

        async def restart(poller: Poller, result: DrillResult) -> None:
            await self._admin_ok(
                "PUT", "/api/v1/overrides/backends/secondary/s2", {"state": "drain"}
            )
            await poller.until("dnsd", lambda a: set(a) == addresses("s1"), 5.0)
            await self.env.restart_dnsd()
            await asyncio.sleep(0.5)
            status, body = await self.env.admin("GET", "/api/v1/status")
            kept = status == 200 and body["overrides"]["backends"] == {"secondary/s2": "drain"}
            result.checks["overrides survive the restart"] = kept
            served = await poller.until("dnsd", lambda a: set(a) == addresses("s1"), 3.0)
            result.checks["answers after the restart still avoid the dead pool"] = served and all(
                not (set(a.addresses) & addresses(*POOLS["primary"]))
                for lane, a in poller.timeline[-10:]
                if lane == "dnsd" and not a.lost
            )
            await self._admin_ok("DELETE", "/api/v1/overrides/backends/secondary/s2")

        self._needs_backends("restart")
        return await self.fault_drill(
            "restart",
            f"www.{ZONE}",
            addresses(*POOLS["primary"]),
            lambda: self.set_modes(POOLS["primary"], "503"),
            lambda: self.set_modes(POOLS["primary"], "ok"),
            detect_bound_s=self.env.timing.detect_bound_s,
            during=restart,
        )

    async def scenario_reload_under_load(self, reloads: int = 20) -> DrillResult:
        result = self.result("reload-under-load")
        ok = 0
        async with Poller(
            self.env, f"www.{ZONE}", self.progress, "reload-under-load", period_s=0.01
        ) as poller:
            await asyncio.sleep(0.3)
            result.fault_at = poller.now()
            for _ in range(reloads):
                status, _body = await self.env.admin("POST", "/api/v1/reload")
                ok += status == 200
                await asyncio.sleep(0.05)
            result.recovered_at = poller.now()
            await asyncio.sleep(0.3)
        result.timeline = poller.timeline
        result.notes.append(
            f"{ok}/{reloads} reloads succeeded while {len(result.timeline)} queries flowed"
        )
        result.checks["every reload succeeded"] = ok == reloads
        result.checks["no SERVFAIL"] = all(a.rcode != "SERVFAIL" for _, a in result.timeline)
        return result

    async def _admin_ok(self, method: str, path: str, body: Any = None) -> None:
        status, reply = await self.env.admin(method, path, body)
        if status != 200:
            raise RuntimeError(f"admin API {method} {path}: {status} {reply}")


def timeline_json(timeline: Any) -> list[dict[str, Any]]:
    """A drill's timeline as the JSON reports give it (scenarios and plans alike)."""
    return [
        {
            "lane": lane,
            "at": round(a.at, 3),
            "rcode": a.rcode,
            "answer": list(a.addresses),
            "ttl": a.ttl,
        }
        for lane, a in timeline
    ]
