"""Benchmark: what one health change costs the event loop with many load-balanced names.
Loopback only; bounded in time.

    python bench/health_churn.py [--names 10000] [--seconds 30]

dnsd serves N load-balanced names over 4 monitored pools of 2 demo backends each (http,
interval 1 s, thresholds 1); one backend flips between 200 and 503 every second. Meanwhile
a client asks `/healthz` every 10 ms. Printed: the event-loop time of each publication of a
health change (dnsd_health_publish_seconds{change="states"}: view, listeners, transfer
serials), and /healthz latency percentiles during the flapping.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))

from tests.churn import start_backends, write_config
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess


def get(port: int, path: str, timeout: float = 60.0) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        body = r.read()
    return time.perf_counter() - started, body


def publish_histogram(port: int) -> tuple[int, float, dict[float, float]]:
    """(count, sum, cumulative buckets) of dnsd_health_publish_seconds{change="states"}."""
    _, body = get(port, "/metrics")
    count, total, buckets = 0, 0.0, {}
    for line in body.decode().splitlines():
        if not line.startswith("dnsd_health_publish_seconds") or 'change="states"' not in line:
            continue
        value = float(line.rsplit(" ", 1)[1])
        if "_bucket" in line:
            le = line.split('le="')[1].split('"')[0]
            buckets[float("inf") if le == "+Inf" else float(le)] = value
        elif "_count" in line:
            count = int(value)
        elif "_sum" in line:
            total = value
    return count, total, buckets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    loop = LoopThread()
    backends = start_backends(loop)
    flapping = backends["a0"]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_config(directory, args.names, {n: b.port for n, b in backends.items()})
        started = time.monotonic()
        with DnsdProcess(directory, "--rrl-rate", "0", start_timeout_s=120) as dnsd:
            while True:
                try:
                    _, body = get(dnsd.admin_port, "/readyz")
                    if json.loads(body)["ready"]:
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            print(f"{args.names} names: ready after {time.monotonic() - started:.1f} s")
            time.sleep(2)
            before = publish_histogram(dnsd.admin_port)
            stop = threading.Event()

            def flap() -> None:
                mode = "503"
                while not stop.wait(1.0):
                    loop.call(flapping.set_mode(mode))
                    mode = "ok" if mode == "503" else "503"

            flapper = threading.Thread(target=flap)
            flapper.start()
            latencies = []
            deadline = time.monotonic() + args.seconds
            try:
                while time.monotonic() < deadline:
                    latencies.append(get(dnsd.admin_port, "/healthz")[0])
                    time.sleep(0.01)
            finally:
                stop.set()
                flapper.join()
            after = publish_histogram(dnsd.admin_port)
    for b in backends.values():
        loop.call(b.stop())
    loop.close()
    count, total = after[0] - before[0], after[1] - before[1]
    worst = min(
        (le for le, n in after[2].items() if n - before[2].get(le, 0) >= count),
        default=float("inf"),
    )
    latencies.sort()
    spread, below = [], 0.0
    for le in sorted(after[2]):
        n = after[2][le] - before[2].get(le, 0)
        if n > below:
            spread.append(f"<= {le * 1000:g} ms: {n - below:.0f}")
        below = n

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    print(f"health changes published: {count}; event-loop time per change: "
          f"mean {total / max(count, 1) * 1000:.1f} ms, every one <= {worst * 1000:g} ms")  # fmt: skip
    print("  by bucket: " + ", ".join(spread))
    print(f"/healthz during the flapping ({len(latencies)} requests): p50 {pct(0.5):.1f} ms, "
          f"p99 {pct(0.99):.1f} ms, max {latencies[-1] * 1000:.1f} ms, "
          f"mean {statistics.mean(latencies) * 1000:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
