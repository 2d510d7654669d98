"""Cached answers with dnstap on against off, on one core.

    python bench/dnstap_rate.py [--runs 3] [--seconds 5] [--harness T,C,Q]

dnsd serves bench/peers.py's zone on core 0, dnsperf asks from core 1 (peers.py's
query mix: the load-balanced name, a static name, NXDOMAINs — each answered from the
answer cache or the zone tables after its first time), once plainly and once with
`--dnstap-file` (every query and answer logged: sample 1). The two alternate, `--runs`
rounds; printed: the median QPS of each, their ratio, the server's CPU time per answer
(/proc/PID/stat: when both reach the harness's ceiling, its inverse ratio is the rate
ratio at saturation), and how many dnstap messages the file holds against the answers
(what the bounded buffers dropped is the difference). The harness's own ceiling is
bench/responder.c's rate with the same settings. Loopback only; every run ends by itself.
"""

from __future__ import annotations

import os
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import peers
from peers import dnsperf, query_file, serve

TAP = "queries.tap"


def tapped(d: Path, port: int) -> list[str]:
    """peers.dnsd with every query and answer written to a dnstap file."""
    return [*peers.dnsd(d, port), "--dnstap-file", str(d / TAP)]


def frames(path: Path) -> int:
    """The dnstap messages in a Frame Streams file (control frames not counted)."""
    data, i, count = path.read_bytes(), 0, 0
    while i + 4 <= len(data):
        (length,) = struct.unpack_from("!I", data, i)
        if length == 0:  # a control frame: its own length follows
            if i + 8 > len(data):
                break
            (length,) = struct.unpack_from("!I", data, i + 4)
            i += 8 + length
            continue
        i += 4 + length
        count += i <= len(data)
    return count


def written(tap: Path) -> float:
    """The messages in the file once the writer thread has caught up (0: no file)."""
    if not tap.exists():
        return 0.0
    time.sleep(1.0)
    return float(frames(tap))


def run(seconds: int) -> Callable[[int, Path], dict[str, float]]:
    def measure(port: int, d: Path) -> dict[str, float]:
        tap = d / TAP
        before = written(tap)
        result = dnsperf(port, query_file(d), seconds)
        if tap.exists():
            result["messages"] = written(tap) - before
        return result

    return measure


def main() -> None:
    args = peers.rate_arguments()
    measure = run(args.seconds)
    results = peers.alternate(
        {"off": (peers.dnsd, measure), "on": (tapped, measure)},
        args.runs,
        peers.warm_query_file,
        "dnsd dnstap",
    )
    ceiling = serve("responder", peers.responder, run(args.seconds))
    qps, cpu = peers.medians(results, "qps"), peers.medians(results, "cpu_us")
    print(
        f"\ndnstap on vs off, {peers.HARNESS}, dnsd on core 0, median of {args.runs}, load "
        f"average {os.getloadavg()[0]:.2f}; harness ceiling (bench/responder.c) "
        f"{ceiling['qps'] if ceiling else float('nan'):.0f} QPS"
    )
    for name, rs in results.items():
        print(
            f"dnstap {name:<3}: {qps[name]:>9.0f} QPS, {cpu[name]:.2f} µs CPU per answer; runs "
            + " / ".join(f"{r['qps']:.0f}" for r in rs)
        )
    logged = [r["messages"] / 2 / (r["sent"] - r["lost"]) for r in results["on"] if "messages" in r]
    if logged:
        print(
            f"dnstap on: {statistics.median(logged):.1%} of the answers in the file (median; "
            "the rest dropped by the full queue and counted)"
        )
    print(
        f"on ÷ off: {qps['on'] / qps['off']:.2f} (target ≥ 0.5); at saturation (CPU per "
        f"answer, off ÷ on): {cpu['off'] / cpu['on']:.2f}"
    )


if __name__ == "__main__":
    main()
