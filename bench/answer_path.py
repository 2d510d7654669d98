"""The full (uncached) answer path per query: this checkout against another one.

    python3 bench/answer_path.py [--against /path/to/other/checkout] [--runs 5] [--queries 3000]

Each run is a fresh process that loads tests/data/differential (a zone both checkouts
read) and answers a fixed mix — an address, a CNAME chain, a wildcard, a referral, SRV
with additional data, NXDOMAIN — through `dnsd.resolve.resolve` (the path a first query of
a key takes; repeats are served from the answer cache and never reach it). Runs of the two
checkouts alternate; prints µs per query of each run and the median ratio.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZONES = ROOT / "tests" / "data" / "differential"
MIX = [("www", "A"), ("chain1", "A"), ("x.wild", "TXT"), ("deep.sub", "A"),
       ("_sip._tcp", "SRV"), ("nothing", "A"), ("alias", "AAAA"), ("@", "MX")]  # fmt: skip

RUN = """
import ipaddress, random, sys, time
sys.path.insert(0, sys.argv[1])
import dns.message
from dnsd.config.loader import load_config
from dnsd.health.view import HealthView
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import resolve
from dnsd.snapshot import compile_snapshot
config, _ = load_config(sys.argv[2])
snap = compile_snapshot(config, 1)
mix = [tuple(item.split("/")) for item in sys.argv[4].split(",")]
queries = [dns.message.make_query((n + "." if n != "@" else "") + "diff.example.", t,
                                  use_edns=0).to_wire() for n, t in mix]
client, health, rng = Client(ipaddress.ip_address("127.0.0.1"), "udp"), HealthView(), random.Random(1)
count = int(sys.argv[3])
for q in queries * 50:  # warm up
    resolve(Request(q, client, snap, health, rng, 0.0))
started = time.perf_counter()
for i in range(count):
    resolve(Request(queries[i % len(queries)], client, snap, health, rng, 0.0))
print((time.perf_counter() - started) / count * 1e6)
"""


def run(checkout: Path, queries: int) -> float:
    mix = ",".join(f"{n}/{t}" for n, t in MIX)
    argv = [sys.executable, "-c", RUN, str(checkout), str(ZONES), str(queries), mix]
    return float(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", type=Path, help="another checkout of dnsd")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=3000)
    args = parser.parse_args()
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(args.runs):
        ours.append(run(ROOT, args.queries))
        if args.against:
            theirs.append(run(args.against, args.queries))
    print(f"this checkout: µs/query {' '.join(f'{v:.1f}' for v in ours)}  median {statistics.median(ours):.1f}")  # fmt: skip
    if theirs:
        ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
        print(f"{args.against}: µs/query {' '.join(f'{v:.1f}' for v in theirs)}  median {statistics.median(theirs):.1f}")  # fmt: skip
        print(f"ratio (this / other), median of {len(ratios)} alternating runs: {statistics.median(ratios):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
