"""The lab's drills, measured like `dnsd drill` (detect, client-visible, failback, lost,
against the bound) but with faults only a network can make: a backend unreachable from
one region, a node gone, a region's backends down. Results are `DrillResult`s, so the
drill report, JSON and timeline pictures apply as they are.

The lanes and the bounds are dnsd.lab.watch's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dnsd.drill.dnsclient import Answer
from dnsd.drill.runner import DrillResult
from dnsd.lab.lab import Lab, ask, http
from dnsd.lab.netns import ip
from dnsd.lab.topology import DELAY_MS, INTERVAL_S, REDIS, REGIONS, THRESHOLD, TTL_S, ZONE, Region
from dnsd.lab.watch import BOUND_S, POLL_S, Watch

WNAM, ENAM, WEU = REGIONS


def settle(timeout: float = 20.0) -> None:
    """Wait until every region's node and resolver answer with both of its own backends:
    each scenario starts from all-healthy, not from the previous one's recovery (nor from
    a resolver's cached answer of it)."""
    for region in REGIONS:

        def healthy(r: Region = region) -> bool:
            both = tuple(sorted(r.backends.values()))
            return all(tuple(ask(r.ns, s) or ()) == both for s in (r.node, r.resolver))

        wait_for(healthy, timeout)


def new_result(scenario: str) -> DrillResult:
    settle()
    return DrillResult(scenario, TTL_S, INTERVAL_S, THRESHOLD, BOUND_S)


def finish(result: DrillResult) -> DrillResult:
    result.queries = len(result.timeline)
    result.lost = sum(1 for lane, a in result.timeline if lane == "resolver" and a.lost)
    result.checks["no lost queries at the resolver"] = result.lost == 0
    result.passed = all(result.checks.values())
    return result


def blackhole(region: Region, address: str, on: bool) -> None:
    ip("route", "add" if on else "del", "blackhole", f"{address}/32", ns=region.ns, check=on)


def source_states(lab: Lab, region: Region, backend: str) -> dict[str, str]:
    for pool in lab.node_status(region)["pools"]:
        for b in pool["backends"]:
            if b["name"] == backend:
                return {s: v["state"] for s, v in b["sources"].items()}
    return {}


def partial_outage(lab: Lab) -> DrillResult:
    """wnam1 unreachable from ENAM only: 1 of 3 sources, healthy everywhere; then from WEU
    too: 2 of 3, out of every region's answers within the bound; then back."""
    result = new_result("partial-outage")
    target = WNAM.backends["wnam1"]
    watch = Watch(result, WNAM)
    has = lambda a: target in a  # noqa: E731
    result.checks["served before the fault"] = watch.until("resolver", has, 10) is not None
    try:
        blackhole(ENAM, target, True)
        settle = INTERVAL_S * THRESHOLD * 3
        result.checks["1 of 3 sources failing: still answered"] = watch.hold(
            settle, lambda got: got["dnsd"] is not None and target in got["dnsd"]
        )
        states = {r.code: source_states(lab, r, "wnam1") for r in REGIONS}
        result.notes.append(f"1 of 3: per-source states seen by each node {states}")
        result.checks["each node sees ENAM's source unhealthy, the others healthy"] = all(
            s.get("ENAM") == "unhealthy"
            and s.get("WNAM") == "healthy"
            and s.get("WEU") == "healthy"
            for s in states.values()
        )
        result.fault_at = watch.now()  # the fault that must move answers: the second source
        blackhole(WEU, target, True)
        gone = lambda a: bool(a) and target not in a  # noqa: E731
        watch.moved(result, gone)
        result.checks["2 of 3: gone from the answers within the bound"] = watch.within_bound(result)
        others = [ask(r.ns, r.node) or () for r in (ENAM, WEU)]
        result.checks["2 of 3: gone in every region"] = all(target not in a for a in others)
        states = {r.code: source_states(lab, r, "wnam1") for r in REGIONS}
        result.notes.append(f"2 of 3: per-source states {states}")
    finally:
        result.recovered_at = watch.now()
        blackhole(ENAM, target, False)
        blackhole(WEU, target, False)
    result.failback_s = watch.until("resolver", has, BOUND_S + 10)
    result.checks["answers came back"] = result.failback_s is not None
    return finish(result)


STUB_WAIT_S = 5.0
STUB_ATTEMPTS = 2  # glibc's `options attempts:2` default


def node_down(lab: Lab) -> DrillResult:
    """WNAM's dnsd node killed: WNAM's resolver keeps answering through the other two
    nodes (lost = 0); the slowest answer meanwhile is the resolver's retry time."""
    import os
    import signal

    result = new_result("node-down")
    watch = Watch(result, WNAM)
    result.checks["served before the fault"] = watch.until("resolver", bool, 10) is not None
    result.fault_at = watch.now()
    for pid in lab.node_pids(WNAM):
        os.kill(pid, signal.SIGKILL)
    slowest = 0.0
    end = watch.now() + 5.0
    while watch.now() < end:
        started = time.monotonic()
        # Lost: no answer after what a stub resolver does (glibc's defaults: wait 5 s, ask
        # twice); the resolver's own retry to another NS may take unbound's backed-off 3 s+.
        got = None
        for _ in range(STUB_ATTEMPTS):
            got = ask(WNAM.ns, WNAM.resolver, timeout=STUB_WAIT_S)
            if got is not None:
                break
        took = time.monotonic() - started
        result.timeline.append(
            (
                "resolver",
                Answer(
                    watch.now(), "TIMEOUT" if got is None else "NOERROR", tuple(got or ()), None
                ),
            )
        )
        slowest = max(slowest, took)
        time.sleep(POLL_S)
    result.notes.append(
        f"slowest resolver answer with the node down: {slowest * 1000:.0f} ms (its retry to another NS)"
    )
    result.client_s = 0.0
    result.recovered_at = watch.now()
    lab.start_node(WNAM)
    result.failback_s = watch.until("dnsd", bool, 30)  # the restarted node's first answer
    result.checks["node back"] = result.failback_s is not None
    return finish(result)


def bus_connected(lab: Lab, region: Region) -> bool:
    try:
        return bool(lab.node_status(region)["bus"]["connected"])
    except OSError:
        return False


def wait_for(check: Callable[[], bool], timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.1)
    return None


def redis_partition(lab: Lab) -> DrillResult:
    """WNAM's node cut from Redis: it keeps serving on its own probes and the last shared
    state (its answers do not change); a backend failing meanwhile is seen by WNAM through
    its own probe; after the cut heals the nodes agree again within N s (reported)."""
    result = new_result("redis-partition")
    watch = Watch(result, WNAM)
    before = watch.until("dnsd", bool, 10)
    result.checks["served before the fault"] = before is not None
    steady = tuple(ask(WNAM.ns, WNAM.node) or ())
    result.fault_at = watch.now()
    primary = lab.primary() or REDIS
    blackhole(WNAM, primary, True)
    try:
        cut = wait_for(lambda: not bus_connected(lab, WNAM), 10)
        result.detect_s = cut  # None: the idle connection did not notice within 10 s
        result.checks["no answer change while cut off"] = watch.hold(
            3.0, lambda got: got["dnsd"] == steady
        )
        lab.set_backend(ENAM, "enam1", "503")  # a change the others share and WNAM cannot hear
        time.sleep(INTERVAL_S * THRESHOLD * 3)
    finally:
        result.recovered_at = watch.now()
        blackhole(WNAM, primary, False)
    same = lambda: source_states(lab, WNAM, "enam1") == source_states(lab, ENAM, "enam1")  # noqa: E731
    converged = wait_for(lambda: bus_connected(lab, WNAM) and same(), 20)
    result.failback_s = converged
    result.client_s = 0.0
    result.notes.append(
        f"after the cut healed, WNAM agreed with ENAM on enam1 in {converged if converged is None else round(converged, 2)} s"
    )
    result.checks["nodes converge after the cut heals"] = converged is not None
    lab.set_backend(ENAM, "enam1", "ok")
    return finish(result)


def region_isolated(lab: Lab) -> DrillResult:
    """WNAM loses its only link: ENAM's clients (watched, with WEU's node) get the answers
    they had (no flip), the isolated WNAM node keeps serving its own clients from its local
    view; after the link comes back the nodes agree again (time reported)."""
    result = new_result("region-isolated")
    watch = Watch(result, ENAM)
    result.checks["served before the fault"] = watch.until("resolver", bool, 10) is not None
    enam = tuple(ask(ENAM.ns, ENAM.resolver) or ())
    weu = tuple(ask(WEU.ns, WEU.node) or ())
    local = tuple(ask(WNAM.ns, WNAM.node) or ())
    port = "v-" + WNAM.ns.removeprefix("dnsdlab-")
    result.fault_at = watch.now()
    ip("link", "set", port, "down", ns="dnsdlab-hub")
    seen: set[tuple[str, ...]] = set()
    try:
        held_local = True
        end = time.monotonic() + max(4.0, BOUND_S)
        while time.monotonic() < end:
            got = watch.poll()
            seen.update({got["resolver"] or (), tuple(ask(WEU.ns, WEU.node) or ())})
            held_local = tuple(ask(WNAM.ns, WNAM.node) or ()) == local and held_local
            time.sleep(POLL_S)
        result.checks["the other regions' answers unchanged"] = seen <= {enam, weu}
        result.checks["the isolated node keeps serving its local view"] = held_local
        if not seen <= {enam, weu}:
            result.notes.append(f"answers seen in ENAM/WEU: {sorted(seen)} (before: {enam}, {weu})")
    finally:
        result.recovered_at = watch.now()
        ip("link", "set", port, "up", ns="dnsdlab-hub")
    converged = wait_for(
        lambda: bus_connected(lab, WNAM) and tuple(ask(WNAM.ns, WNAM.node) or ()) == local, 20
    )
    result.failback_s = converged
    result.client_s = 0.0
    result.checks["converged after the link came back"] = converged is not None
    return finish(result)


def region_down(lab: Lab) -> DrillResult:
    """Both WNAM backends fail: WNAM's clients move to the next region (ENAM) by geo
    steering within the bound, and come back after recovery."""
    result = new_result("region-down")
    watch = Watch(result, WNAM)
    own = set(WNAM.backends.values())
    nxt = set(ENAM.backends.values())
    result.checks["served before the fault"] = (
        watch.until("resolver", lambda a: bool(set(a) & own), 10) is not None
    )
    try:
        result.fault_at = watch.now()
        for name in WNAM.backends:
            lab.set_backend(WNAM, name, "503")
        moved = lambda a: bool(a) and set(a) <= nxt  # noqa: E731
        watch.moved(result, moved)
        result.checks["moved to the next region within the bound"] = watch.within_bound(result)
    finally:
        result.recovered_at = watch.now()
        for name in WNAM.backends:
            lab.set_backend(WNAM, name, "ok")
    result.failback_s = watch.until("resolver", lambda a: bool(set(a) & own), BOUND_S + 10)
    result.checks["answers came back"] = result.failback_s is not None
    return finish(result)


FAILOVER_BOUND_S = 10.0  # down after 1 s, the sentinels' vote, the promotion


def on_primary(lab: Lab, primary: str) -> bool:
    """Every node connected, to `primary`."""
    try:
        return all(
            (bus := lab.node_status(r)["bus"])["connected"] and bus["primary"] == f"{primary}:6379"
            for r in REGIONS
        )
    except OSError:
        return False


def config_served(lab: Lab, name: str, address: str) -> Callable[[], bool]:
    return lambda: ask(WEU.ns, WEU.node, f"{name}.{ZONE}", timeout=0.3) == [address]


def redis_failover(lab: Lab) -> DrillResult:
    """The Redis primary killed while ENAM's enam1 fails: the sentinels promote the replica,
    every node follows it; ENAM's node alone cannot outvote the other sources, so enam1
    leaves ENAM's answers once health sharing resumes through the new primary (within the
    promotion plus the bound), no query is lost, and a config change made on WNAM after the
    promotion is served by WEU (times reported). The old primary comes back as a replica."""
    import os
    import signal

    result = new_result("redis-failover")
    result.bound_s = FAILOVER_BOUND_S + BOUND_S
    watch = Watch(result, ENAM)
    failed = ENAM.backends["enam1"]
    has_failed = lambda a: failed in a  # noqa: E731
    result.checks["served before the fault"] = watch.until("resolver", has_failed, 10) is not None
    old = lab.primary() or REDIS
    result.checks["every node on the primary before the fault"] = (
        wait_for(lambda: on_primary(lab, old), 10) is not None
    )
    result.fault_at = watch.now()
    try:
        lab.set_backend(ENAM, "enam1", "503")
        for pid in lab.redis_pids(old):
            os.kill(pid, signal.SIGKILL)
        new: str | None = None
        never_empty = True
        while watch.now() - result.fault_at < FAILOVER_BOUND_S + 20:
            got = watch.poll()
            never_empty = never_empty and bool(got["dnsd"]) and bool(got["resolver"])
            new = lab.primary()
            if new not in (None, old):
                break
            time.sleep(POLL_S)
        promoted = watch.now() - result.fault_at
        result.checks["the sentinels promoted the replica"] = new not in (None, old)
        result.notes.append(f"replica {new} promoted {promoted:.2f} s after the primary was killed")
        gone = lambda a: bool(a) and failed not in a  # noqa: E731
        left = watch.until("dnsd", gone, result.bound_s + 5)
        result.detect_s = None if left is None else watch.now() - result.fault_at
        client = watch.until("resolver", gone, result.bound_s + 5)
        result.client_s = None if client is None else watch.now() - result.fault_at
        result.checks["answers never empty during the failover"] = never_empty
        result.checks["enam1 left ENAM's answers within the promotion and the bound"] = (
            result.client_s is not None and result.client_s <= result.bound_s
        )
        followed = wait_for(lambda: new is not None and on_primary(lab, new), 15)
        result.checks["every node follows the new primary"] = followed is not None
        name, address = f"failover{int(time.time())}", "192.0.2.99"
        route = f"http://{WNAM.node}:8053/api/v1/config/zones/{ZONE}/records/{name}"
        made = time.monotonic()
        http(WNAM.ns, route, {"A": [address], "ttl": 1}, "PUT")
        synced = wait_for(config_served(lab, name, address), 15)
        result.checks["a config change on WNAM served by WEU after the promotion"] = (
            synced is not None
        )
        result.notes.append(
            f"after the promotion: a config change on WNAM served by WEU in "
            f"{time.monotonic() - made:.2f} s; enam1 out of ENAM's node answers "
            f"{result.detect_s if result.detect_s is None else round(result.detect_s, 2)} s after the kill"
        )
        http(WNAM.ns, route, method="DELETE")
        in_step = wait_for(
            lambda: len({lab.node_status(r)["bus"]["config_sync"]["digest"] for r in REGIONS}) == 1,
            10,
        )
        result.checks["every node has the same config digest"] = in_step is not None
    finally:
        result.recovered_at = watch.now()
        lab.set_backend(ENAM, "enam1", "ok")
        lab.start_redis(old)  # back as a replica of the new primary (the sentinels see to it)
    result.failback_s = watch.until("resolver", has_failed, BOUND_S + 10)
    result.checks["answers came back"] = result.failback_s is not None
    return finish(result)


def set_paths(lab: Lab, extra: dict[tuple[str, str], float] | None = None) -> None:
    """Every backend answers a probe from another region after that path's delay
    (topology.DELAY_MS), plus `extra[(backend region, source region)]`."""
    for backend_region in REGIONS:
        for source in REGIONS:
            delay = (
                0.0
                if source is backend_region
                else DELAY_MS[frozenset({backend_region.code, source.code})]
            )
            delay += (extra or {}).get((backend_region.code, source.code), 0.0)
            for name in backend_region.backends:
                lab.set_backend(backend_region, name, "slow" if delay else "ok", source.code, delay)


def dynamic_rtt(lab: Lab) -> DrillResult:
    """`dyn` (steering: dynamic): each region's clients get the pool nearest by the RTT
    measured from their region; `explain` on each node shows RTTs near the path delays;
    a longer path (ENAM's own backends, +100 ms from ENAM) moves ENAM's clients to the
    next nearest (WNAM, 35 ms) within the bound, and back when it is short again.

    The delay is added by the backends per probing region (DemoBackend's per-source
    `slow`), because the machines this is built on have no `tc netem`; the vantage points,
    probes and Redis sharing are the lab's real ones."""
    result = new_result("dynamic-rtt")
    name = f"dyn.{ZONE}"
    watch = Watch(result, ENAM, name)
    set_paths(lab)
    try:
        own = {r.code: set(r.backends.values()) for r in REGIONS}
        nearest = {}
        for region in REGIONS:

            def settled(r: Region = region) -> bool:
                got = ask(r.ns, r.node, name) or []
                return bool(got) and set(got) <= own[r.code]

            nearest[region.code] = wait_for(settled, 15) is not None
        result.checks["each region's clients get their own region's pool"] = all(nearest.values())
        seen: list[str] = []

        def rtts_match() -> bool:
            """explain on each node, for a client of its region: RTT per pool, beyond the
            RTT to its own region's pool (the machine's own time to answer a probe, which a
            loaded machine makes tens of milliseconds), within 20% of the path delay (the
            EWMA needs a few probes to get there)."""
            seen.clear()
            worst = 0.0
            for region in REGIONS:
                candidates = lab.explain(region, name, region.address(99))["candidates"]
                local = [c.get("rtt_ms") for c in candidates if c["pool"].upper() == region.code]
                base = (local[0] or 0.0) if local else 0.0
                for candidate in candidates:
                    pool_region = candidate["pool"].upper()
                    configured = (
                        0.0
                        if pool_region == region.code
                        else DELAY_MS[frozenset({pool_region, region.code})]
                    )
                    measured = candidate.get("rtt_ms")
                    seen.append(
                        f"{region.code} → {candidate['pool']}: configured {configured:.0f} ms, measured {measured if measured is None else round(measured, 1)} ms"
                    )
                    if configured:
                        extra = (measured or 0.0) - base
                        worst = max(worst, abs(extra - configured) / configured)
            return worst <= 0.2

        converged = wait_for(rtts_match, 20)
        result.notes.extend(seen)
        result.checks["explain's RTTs within 20% of the path delays"] = converged is not None
        result.fault_at = watch.now()
        set_paths(lab, {("ENAM", "ENAM"): 100.0})
        wnam = set(WNAM.backends.values())
        moved = lambda a: bool(a) and set(a) <= wnam  # noqa: E731
        watch.moved(result, moved)
        result.checks["ENAM's clients moved to WNAM within the bound"] = watch.within_bound(result)
        result.recovered_at = watch.now()
        set_paths(lab)
        result.failback_s = watch.until(
            "resolver", lambda a: bool(a) and set(a) <= own["ENAM"], BOUND_S + 10
        )
        result.checks["answers came back"] = result.failback_s is not None
    finally:
        for region in REGIONS:
            for backend in region.backends:
                lab.set_backend(region, backend, "ok")
    return finish(result)


SCENARIOS: dict[str, Callable[[Lab], DrillResult]] = {
    "partial-outage": partial_outage,
    "dynamic-rtt": dynamic_rtt,
    "node-down": node_down,
    "region-down": region_down,
    "redis-partition": redis_partition,
    "region-isolated": region_isolated,
    "redis-failover": redis_failover,
}
