"""The active-pool metrics of a big config stay cheap: 10,000 load balancers (310,000
samples) are rendered once per snapshot and health states, from the status document's own
computation, and a scrape between two changes costs nothing; the text is what a
Prometheus parser reads, and says what the status document says."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from dnsd.admin.active_pool_metrics import ActivePools
from dnsd.admin.metrics import Metrics
from dnsd.admin.status import (
    answering_pool,
    health_failed_over,
    region_states,
    shared_region_states,
)
from dnsd.config.loader import load_config
from dnsd.health.store import HealthStore
from dnsd.snapshot import SnapshotHolder, compile_snapshot

LBS = 10_000


def big_config(directory: Path) -> None:
    lines = [
        "zone: big.test", "soa: {mname: ns1.big.test., rname: h.big.test.}", "records:",
        '  "@": {NS: ns1.big.test.}', "  ns1: {A: 192.0.2.1}",
        *(f"  w{i}: {{lb: lb{i}}}" for i in range(LBS)), "pools:",
        *(f"  p{i}: {{region: WEU, backends: [{{name: b{i}, address: 192.0.2.{i + 10}}}]}}"
          for i in range(20)),
        "load_balancers:",
    ]  # fmt: skip
    for i in range(LBS):
        a, b = f"p{i % 20}", f"p{(i + 1) % 20}"
        geo = f", steering: geo, region_pools: {{WEU: [{b}, {a}]}}" if i % 2 else ""
        lines.append(f"  lb{i}: {{ttl: 30, default_pools: [{a}, {b}]{geo}}}")
    (directory / "big.yaml").write_text("\n".join(lines) + "\n")


def test_ten_thousand_load_balancers_render_once_per_change(tmp_path: Path) -> None:
    """Work counted, not timed (the timing is bench/active_pool_metrics.py): the first
    render asks each load balancer's region states once, a scrape between two changes asks
    none, new health states ask each once again."""
    big_config(tmp_path)
    config, _ = load_config(tmp_path)
    snap = compile_snapshot(config, 1)
    holder, store = SnapshotHolder(snap), HealthStore()
    store.set_snapshot(snap)
    store.publish()
    server = SimpleNamespace(holder=holder, store=store)
    asked: list[str] = []

    def counted(lb: Any, now: float) -> Any:
        asked.append(lb.name)
        return shared_region_states(server, lb, now)

    now = [1_000_000.0]  # a clock of our own: no refresh falls due while we look
    active = ActivePools(
        holder,
        store,
        counted,
        answering_pool,
        clock=lambda: now[0],
        health_failed=lambda lb, now: health_failed_over(server, lb, now),  # type: ignore[arg-type]
    )
    metrics = Metrics()
    metrics.add_text(active.text)

    first = metrics.render()
    assert len(asked) == LBS and len(set(asked)) == LBS  # each load balancer once
    asked.clear()
    assert active.text() is active.text()  # kept: nothing is rendered again
    now[0] += 0.5
    assert active.text() is active.text()
    assert asked == []  # a scrape between two changes costs no load balancer's states
    store.set_pool_override("p1", "down")  # new health states: rendered again
    changed = active.text()
    assert len(asked) == LBS and len(set(asked)) == LBS
    assert changed != first[-len(changed) :]

    lines = changed.decode().splitlines()
    assert sum(line.startswith("dnsd_lb_active_pool{") for line in lines) == LBS * 14
    assert sum(line.startswith("dnsd_lb_failed_over{") for line in lines) == LBS * 14
    assert sum(line.startswith("dnsd_lb_fail_open{") for line in lines) == LBS
    # p1 is forced down: planned work, however many regions it moves (none by health)
    by_health = [line for line in lines if line.startswith("dnsd_lb_failed_over_by_health{")]
    assert len(by_health) == LBS and all(line.endswith("} 0.0") for line in by_health)
    # A Prometheus parser reads it (the whole text takes it half a minute: some of it).
    picked = ("lb0", "lb1", "lb2", "lb19", "lb20", "lb21", "lb9999")
    sample = [line for line in lines if line.startswith("#")
              or any(f'lb="{name}"' in line for name in picked)]  # fmt: skip
    families = {f.name: f for f in text_string_to_metric_families("\n".join(sample) + "\n")}
    pools = {(s.labels["lb"], s.labels["region"]): s.labels["pool"]
             for s in families["dnsd_lb_active_pool"].samples}  # fmt: skip
    failed = {(s.labels["lb"], s.labels["region"]): s.value
              for s in families["dnsd_lb_failed_over"].samples}  # fmt: skip
    assert len(pools) == len(failed) == len(picked) * 14
    for name in picked:  # as the status document says
        chains, off_first = region_states(server, config.load_balancers[name], time.time())
        for region, chain in chains.items():
            assert pools[(name, region)] == chain.split(" -> ")[-1]
            assert failed[(name, region)] == (1.0 if region in off_first else 0.0)
    assert pools[("lb1", "WEU")] == "p2" and pools[("lb0", "WEU")] == "p0"  # geo: p2 first
    assert pools[("lb20", "ENAM")] == "p0" and failed[("lb20", "ENAM")] == 0.0  # as lb0
    assert pools[("lb19", "ENAM")] == "p19" and failed[("lb19", "ENAM")] == 0.0
    assert pools[("lb21", "WEU")] == "p2" and failed[("lb21", "WEU")] == 0.0
    assert pools[("lb1", "ENAM")] == "p2" and failed[("lb1", "ENAM")] == 1.0  # p1 is down
