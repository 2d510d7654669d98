"""Cached answers with the traffic-control features configured against without, on one core.

    python bench/traffic_control_rate.py [--runs 3] [--seconds 5] [--harness T,C,Q]

dnsd serves bench/peers.py's zone on core 0, dnsperf asks from core 1 (peers.py's query mix:
the load-balanced name, a static name, NXDOMAINs), once as peers.py writes it and once with
the load-balanced name using every traffic-control feature at once: `when_all_down:
last_good`, `ramp`, `overflow: waterfall` with pool capacities (never reached: the shares
stay whole), `answer_pools: 2` with `distinct: domain`, and an HTTPS record
beside `lb:`. The two alternate, `--runs` rounds; printed: the median QPS of each, their
ratio (target ≥ 0.9) and the server's CPU time per answer (its inverse ratio is the rate
ratio at saturation). Loopback only; every run ends by itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import peers
from peers import dnsperf, query_file

FEATURES = {
    "  www: {lb: www}": '  www: {lb: www, HTTPS: "1 . alpn=h2,h3"}',
    "  www: {ttl: 30, default_pools: [primary, secondary]}": (
        "  www: {ttl: 30, default_pools: [primary, secondary], when_all_down: last_good,"
        " ramp: {duration: 10m, steps: 5}, overflow: waterfall, answer_pools: 2,"
        " distinct: domain}"
    ),
    "  primary: {backends:": "  primary: {capacity: 10000000, domain: rack-1, backends:",
    "  secondary: {backends:": "  secondary: {capacity: 10000000, domain: rack-2, backends:",
}


def featured(d: Path, port: int) -> list[str]:
    """peers.dnsd with the load-balanced name using every traffic-control feature."""
    command = peers.dnsd(d, port)
    zone = d / "zones" / "bench.yaml"
    text = zone.read_text()
    for plain, rich in FEATURES.items():
        assert plain in text, plain  # peers.py's zone changed: keep this in step
        text = text.replace(plain, rich)
    zone.write_text(text)
    return command


def main() -> None:
    args = peers.rate_arguments()

    def measure(port: int, d: Path) -> dict[str, float]:
        return dnsperf(port, query_file(d), args.seconds)

    variants = {"without": (peers.dnsd, measure), "with": (featured, measure)}
    results = peers.alternate(variants, args.runs, peers.warm_query_file, "dnsd traffic control")
    qps, cpu = peers.medians(results, "qps"), peers.medians(results, "cpu_us")
    print(
        f"\ntraffic control configured vs not, {peers.HARNESS}, dnsd on core 0, median of "
        f"{args.runs}, load average {os.getloadavg()[0]:.2f}"
    )
    for name, rs in results.items():
        print(
            f"{name:<7}: {qps[name]:>9.0f} QPS, {cpu[name]:.2f} µs CPU per answer; runs "
            + " / ".join(f"{r['qps']:.0f}" for r in rs)
        )
    print(
        f"with ÷ without: {qps['with'] / qps['without']:.2f} (target ≥ 0.9); at saturation "
        f"(CPU per answer, without ÷ with): {cpu['without'] / cpu['with']:.2f}"
    )


if __name__ == "__main__":
    main()
