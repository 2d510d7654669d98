"""A configuration of many load-balanced names over 4 monitored pools of 2 demo backends
(http, interval 1 s, thresholds 1), shared by tests/e2e/test_status_at_scale.py and the
benchmarks bench/health_churn.py and bench/monitored_scale.py."""

from __future__ import annotations

from pathlib import Path

from dnsd.drill.backend import DemoBackend
from tests.loop_thread import LoopThread

POOLS = ["a", "b", "c", "d"]


def write_config(directory: Path, names: int, ports: dict[str, int]) -> None:
    lines = [
        "zone: churn.test",
        "soa: {mname: ns1.churn.test., rname: h.churn.test.}",
        "records:",
        '  "@": {NS: ns1.churn.test.}',
        "  ns1: {A: 192.0.2.1}",
    ]
    lines += [f"  n{i}: {{lb: l{i}}}" for i in range(names)]
    lines += [
        "monitors:",
        "  m: {type: http, path: /healthz, interval: 1s, timeout: 0.5s,"
        " healthy_threshold: 1, unhealthy_threshold: 1}",
        "pools:",
    ]
    for pool in POOLS:
        backends = ", ".join(
            f"{{name: {pool}{k}, address: 127.0.0.1, port: {ports[f'{pool}{k}']}}}"
            for k in range(2)
        )
        lines.append(f"  {pool}: {{monitor: m, backends: [{backends}]}}")
    lines.append("load_balancers:")
    lines += [
        f"  l{i}: {{ttl: 30, default_pools: [{POOLS[i % 4]}, {POOLS[(i + 1) % 4]}]}}"
        for i in range(names)
    ]
    (directory / "churn.test.yaml").write_text("\n".join(lines) + "\n")


def start_backends(loop: LoopThread) -> dict[str, DemoBackend]:
    """The 8 demo backends of the configuration, on loopback."""
    return {
        f"{p}{k}": loop.call(DemoBackend(f"{p}{k}", control_port=None).start())
        for p in POOLS
        for k in range(2)
    }
