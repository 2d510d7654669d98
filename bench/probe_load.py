"""Benchmark: DNS answer latency while N backends are probed every second, against the
same server with no probes. Loopback only; bounded in count and time.

    python bench/probe_load.py [--backends 500] [--queries 20000]

A backend process listens on N loopback ports (HTTP 200 on /healthz); dnsd serves 50
pools of N/50 backends with an http monitor (interval 1s); a client sends queries one
after another over UDP and reports latency percentiles. Then the same without monitors.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))

from dnslib import DNSRecord

from tests.processes import DnsdProcess


def run_backends(count: int, ports: multiprocessing.Queue, stop: multiprocessing.Event) -> None:  # type: ignore[type-arg]
    from aiohttp import web

    async def main() -> None:
        async def ok(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_get("/healthz", ok)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        for _ in range(count):
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            ports.put(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        while not stop.is_set():
            await asyncio.sleep(0.2)
        await runner.cleanup()

    asyncio.run(main())


def write_config(directory: Path, ports: list[int], monitored: bool) -> None:
    pools, names = [], []
    per_pool = max(1, len(ports) // 50)
    for i in range(0, len(ports), per_pool):
        name = f"pool{i // per_pool}"
        names.append(name)
        backends = "\n".join(
            f"      - {{name: b{p}, address: 127.0.0.1, port: {p}}}"
            for p in ports[i : i + per_pool]
        )
        monitor = "    monitor: m\n" if monitored else ""
        pools.append(f"  {name}:\n{monitor}    backends:\n{backends}")
    text = f"""\
zone: bench.test
soa: {{mname: ns1.bench.test., rname: h.bench.test.}}
records:
  "@": {{NS: ns1.bench.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: www}}
  static: {{A: 192.0.2.2}}
{"monitors:" if monitored else ""}
{"  m: {type: http, path: /healthz, interval: 1s, timeout: 2s}" if monitored else ""}
pools:
{chr(10).join(pools)}
load_balancers:
  www: {{default_pools: [{", ".join(names)}], steering: random}}
"""
    (directory / "bench.test.yaml").write_text(text)


def measure(port: int, queries: int) -> list[float]:
    wires = [DNSRecord.question(n).pack() for n in ("www.bench.test", "static.bench.test")]
    latencies = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2.0)
        for i in range(queries):
            started = time.perf_counter()
            s.sendto(wires[i % 2], ("127.0.0.1", port))
            s.recv(4096)
            latencies.append((time.perf_counter() - started) * 1000.0)
    return latencies


def summary(label: str, latencies: list[float]) -> str:
    q = statistics.quantiles(latencies, n=1000)
    return (
        f"{label:<28} n={len(latencies)}  mean {statistics.fmean(latencies):.3f} ms  "
        f"p50 {q[499]:.3f}  p99 {q[989]:.3f}  p99.9 {q[998]:.3f}  max {max(latencies):.3f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", type=int, default=500)
    parser.add_argument("--queries", type=int, default=20000)
    args = parser.parse_args()
    ports_q: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    stop = multiprocessing.Event()
    proc = multiprocessing.Process(target=run_backends, args=(args.backends, ports_q, stop))
    proc.start()
    try:
        ports = [ports_q.get(timeout=60) for _ in range(args.backends)]
        results = []
        for monitored in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                write_config(Path(tmp), ports, monitored)
                with DnsdProcess(
                    tmp, "--state-dir", str(Path(tmp) / "state"), "--rrl-rate", "0"
                ) as dnsd:
                    time.sleep(3.0 if monitored else 0.5)  # let probing reach its steady state
                    measure(dnsd.port, 500)  # warm-up
                    label = f"{args.backends} backends probed/s" if monitored else "no probes"
                    results.append(summary(label, measure(dnsd.port, args.queries)))
        print(
            f"dnsd probe-load benchmark, {time.strftime('%Y-%m-%d')}, {multiprocessing.cpu_count()} cores"
        )
        print("\n".join(results))
    finally:
        stop.set()
        proc.join(timeout=10)


if __name__ == "__main__":
    main()
