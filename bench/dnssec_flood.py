"""A random-name flood against online signing: dnsd and Knot, signed and not.

    python bench/dnssec_flood.py [--runs 3] [--seconds 8]

Every query asks for a name that does not exist (`r<random>.bench.test A`, DO=1, never
the same name twice in a run: each server starts afresh per run, so no answer comes from a
cache), served on core 0 (taskset) and driven by dnsperf on core 1 (bench/peers.py's
harness). Four servers, alternating, `--runs` times each: dnsd unsigned, dnsd signed
(`dnssec: {algorithm: 13}`, compact denial: one signature per answer), Knot 3 unsigned,
Knot 3 signing online (`mod-onlinesign`, ECDSA P-256: one signature per answer too). It
prints the median QPS of each and the two signed ÷ unsigned ratios.

Then, while dnsperf floods the signed server with random names, a second client (this
process, on core 1) asks for a cached name (`static.bench.test A`, DO=1) 200 times a second
and records each answer's round trip: p50 and p99 of the cached answers during the flood
(unanswered ones counted as lost), beside the same client's figures with no flood.
Every address is on 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import peers
from peers import ZONE, dnsd, dnsd_signed, dnsperf, knot, serve

Build = Callable[[Path, int], list[str]]
NAMES = 600_000  # more than any dnsd run answers: no name is asked twice in a run
PROBE_RATE = 200  # cached queries a second during the flood


def knot_signed(d: Path, port: int) -> list[str]:
    """Knot signing online (mod-onlinesign, ECDSA P-256), as Knot's docs set it up."""
    cmd = knot(d, port)
    conf = (d / "knot.conf").read_text()
    conf = conf.replace(
        "zone:\n",
        "policy:\n  - id: online\n    algorithm: ecdsap256sha256\n"
        "    single-type-signing: on\n    nsec3: off\n"
        "mod-onlinesign:\n  - id: os\n    policy: online\n"
        "zone:\n",
    )
    conf += "    module: mod-onlinesign/os\n"
    (d / "knot.conf").write_text(conf)
    return cmd


SERVERS: dict[str, Build] = {
    "dnsd unsigned": dnsd,
    "dnsd signed": dnsd_signed,
    "knot unsigned": knot,
    "knot signed (mod-onlinesign)": knot_signed,
}


def random_names(path: Path, seed: int) -> Path:
    rng = random.Random(seed)
    with open(path, "w") as out:
        for _ in range(NAMES):
            out.write(f"r{rng.getrandbits(56):014x}.{ZONE} A\n")
    return path


def flood(names: Path, seconds: int) -> Callable[[int, Path], dict[str, float]]:
    def run(port: int, d: Path) -> dict[str, float]:
        return dnsperf(port, names, seconds, ("-D",))

    return run


def probe(port: int, seconds: float) -> dict[str, float]:
    """Round trips of a cached DO=1 answer, PROBE_RATE a second for `seconds`."""
    with contextlib.suppress(OSError):  # wake at once when the answer comes, dnsperf or not
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    query = bytearray(_query(f"static.{ZONE}"))
    times: list[float] = []
    lost = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.2", 0))
        sock.settimeout(0.5)
        sock.sendto(bytes(query), ("127.0.0.1", port))  # the first answer fills the cache
        with contextlib.suppress(TimeoutError):
            sock.recv(4096)
        end = time.monotonic() + seconds
        ident = 0
        while time.monotonic() < end:
            ident = (ident + 1) & 0xFFFF
            query[0:2] = ident.to_bytes(2, "big")
            started = time.perf_counter()
            sock.sendto(bytes(query), ("127.0.0.1", port))
            try:
                while True:
                    reply = sock.recv(4096)
                    if reply[:2] == query[:2]:
                        break
                times.append((time.perf_counter() - started) * 1000)
            except TimeoutError:
                lost += 1
            time.sleep(max(0.0, 1 / PROBE_RATE - (time.perf_counter() - started)))
    times.sort()
    pick = (lambda q: times[min(len(times) - 1, int(len(times) * q))]) if times else None
    return {
        "p50_ms": pick(0.50) if pick else float("nan"),
        "p99_ms": pick(0.99) if pick else float("nan"),
        "answered": len(times),
        "lost": lost,
    }


def _query(name: str) -> bytes:
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    opt = b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00"  # EDNS, 1232, DO
    return b"\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01" + qname + b"\x00\x01\x00\x01" + opt


def flood_with_probe(names: Path, seconds: int) -> Callable[[int, Path], dict[str, float]]:
    def run(port: int, d: Path) -> dict[str, float]:
        time.sleep(1.0)  # started: settle first
        quiet = probe(port, 3.0)
        found: dict[str, float] = {}
        thread = threading.Thread(
            target=lambda: found.update(dnsperf(port, names, seconds, ("-D",)))
        )
        thread.start()
        time.sleep(1.0)  # the flood is under way
        during = probe(port, seconds - 2.0)
        thread.join()
        return {**found, **{f"quiet_{k}": v for k, v in quiet.items()}, **during}

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--skip-install", action="store_true")
    args = parser.parse_args()
    if not args.skip_install:
        peers.install()
    os.sched_setaffinity(0, {1})  # this process (the probe) beside dnsperf, off the server's core
    results: dict[str, list[dict[str, float]]] = {name: [] for name in SERVERS}
    with tempfile.TemporaryDirectory(prefix="bench-dnssec-") as tmp:
        for run in range(args.runs):
            names = random_names(Path(tmp) / f"names-{run}.txt", run)
            for name, build in SERVERS.items():  # alternating: load drifts hit every server
                r = serve(name, build, flood(names, args.seconds))
                if r is None:
                    sys.exit(f"{name} did not start")
                results[name].append(r)
                print(f"run {run + 1} {name}: {r['qps']:.0f} QPS, lost {r['lost']:.0f}", flush=True)
        probed = {
            name: serve(
                name, SERVERS[name], flood_with_probe(Path(tmp) / "names-0.txt", args.seconds)
            )
            for name in ("dnsd signed", "knot signed (mod-onlinesign)")
        }
    qps = {name: statistics.median(r["qps"] for r in rs) for name, rs in results.items()}
    print(f"\nRandom nonexistent names, DO=1, {time.strftime('%Y-%m-%d')}, median of {args.runs} × "
          f"{args.seconds} s, server on core 0, {peers.HARNESS}")  # fmt: skip
    print("| server | QPS (median) | runs | CPU/answer |")
    print("|---|---|---|---|")
    for name, rs in results.items():
        cpu = statistics.median(r["cpu_us"] for r in rs)
        runs = " / ".join(f"{r['qps']:.0f}" for r in rs)
        print(f"| {name} | {qps[name]:,.0f} | {runs} | {cpu:.1f} µs |")
    dnsd_ratio = qps["dnsd signed"] / qps["dnsd unsigned"]
    knot_ratio = qps["knot signed (mod-onlinesign)"] / qps["knot unsigned"]
    print(f"\nsigned ÷ unsigned: dnsd {dnsd_ratio:.3f} (target ≥ 0.15), Knot {knot_ratio:.3f}")
    for name, r in probed.items():
        if r is None:
            continue
        print(f"{name}: cached answers during the flood ({r['qps']:.0f} QPS of random names): "
              f"p50 {r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms (target ≤ 5 ms), "
              f"{r['answered']:.0f} answered, {r['lost']:.0f} lost; with no flood p50 "
              f"{r['quiet_p50_ms']:.3f} ms, p99 {r['quiet_p99_ms']:.3f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
