"""Benchmark: 10,000 monitored load-balanced names. Loopback only; bounded.

    python bench/monitored_scale.py [--names 10000]

dnsd serves N load-balanced names over 4 monitored pools of 2 demo backends (http, interval
1 s; the configuration of bench/health_churn.py). Printed: the first DNS answer, /readyz 200
and every backend probed healthy after the start; /api/v1/status with limit=100 and
unfiltered; /metrics; a SIGHUP reload with one record changed (its time, and the slowest DNS
answer and /healthz while it runs, asked every 20 ms); the RSS after 1,000 distinct queries.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))
sys.path.insert(0, str(Path(__file__).parent))

from dnslib import DNSRecord
from health_churn import get

from tests.churn import start_backends, write_config
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess


def ask(port: int, name: str, timeout: float = 2.0) -> float | None:
    """Seconds to the answer, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        started = time.perf_counter()
        s.sendto(DNSRecord.question(name).pack(), ("127.0.0.1", port))
        try:
            s.recv(4096)
        except TimeoutError:
            return None
        return time.perf_counter() - started


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def all_healthy(port: int) -> bool:
    _, body = get(port, "/api/v1/status?limit=1")
    status = json.loads(body)
    return all(b["probed"] == "healthy" for p in status["pools"] for b in p["backends"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=10_000)
    args = parser.parse_args()
    loop = LoopThread()
    backends = start_backends(loop)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_config(directory, args.names, {n: b.port for n, b in backends.items()})
        started = time.monotonic()
        marks: dict[str, float] = {}
        with DnsdProcess(directory, "--rrl-rate", "0", start_timeout_s=300) as dnsd:
            assert dnsd.proc is not None
            while len(marks) < 3:
                since = time.monotonic() - started
                if "answer" not in marks and ask(dnsd.port, "n1.churn.test", 0.2) is not None:
                    marks["answer"] = since
                try:
                    if (
                        "ready" not in marks
                        and json.loads(get(dnsd.admin_port, "/readyz")[1])["ready"]
                    ):
                        marks["ready"] = since
                    if "healthy" not in marks and all_healthy(dnsd.admin_port):
                        marks["healthy"] = since
                except OSError:
                    pass
                assert since < 300, marks
                time.sleep(0.1)
            print(f"{args.names} monitored names: first answer {marks['answer']:.1f} s, /readyz 200 "
                  f"{marks['ready']:.1f} s, every backend healthy {marks['healthy']:.1f} s")  # fmt: skip
            for path in ("/api/v1/status?limit=100&offset=5000", "/api/v1/status", "/metrics"):
                times = [get(dnsd.admin_port, path)[0] for _ in range(3)]
                print(f"GET {path}: first {times[0] * 1000:.0f} ms, then "
                      f"{times[1] * 1000:.0f} and {times[2] * 1000:.0f} ms")  # fmt: skip
            for i in range(1000):
                ask(dnsd.port, f"n{i}.churn.test")
            print(f"RSS after 1,000 distinct queries: {rss_mib(dnsd.proc.pid):.0f} MiB")
            slowest = {"dns": 0.0, "healthz": 0.0}
            stop = threading.Event()

            def watch() -> None:
                while not stop.is_set():
                    took = ask(dnsd.port, "n7.churn.test")
                    slowest["dns"] = max(slowest["dns"], took if took is not None else 2.0)
                    slowest["healthz"] = max(
                        slowest["healthz"], get(dnsd.admin_port, "/healthz")[0]
                    )
                    time.sleep(0.02)

            watcher = threading.Thread(target=watch)
            watcher.start()
            zone = directory / "churn.test.yaml"
            zone.write_text(zone.read_text().replace("ns1: {A: 192.0.2.1}", "ns1: {A: 192.0.2.2}"))
            generation = json.loads(get(dnsd.admin_port, "/readyz")[1])["generation"]
            began = time.monotonic()
            dnsd.proc.send_signal(signal.SIGHUP)
            while json.loads(get(dnsd.admin_port, "/readyz")[1])["generation"] == generation:
                assert time.monotonic() - began < 120
                time.sleep(0.05)
            took = time.monotonic() - began
            time.sleep(1)
            stop.set()
            watcher.join()
            print(f"SIGHUP reload with one record changed: {took:.1f} s; meanwhile the slowest DNS "
                  f"answer {slowest['dns'] * 1000:.0f} ms, /healthz {slowest['healthz'] * 1000:.0f} ms")  # fmt: skip
    for b in backends.values():
        loop.call(b.stop())
    loop.close()
    big_config_rss()


def big_config_rss() -> None:
    """The big unmonitored configuration of bench/bigconfig.py (10,000 load balancers,
    100,000 records): RSS after 1,000 distinct queries."""
    from bigconfig import ZONE
    from bigconfig import write_config as write_big

    with tempfile.TemporaryDirectory() as tmp:
        write_big(Path(tmp), 10_000, 100_000, 20)
        with DnsdProcess(Path(tmp), "--rrl-rate", "0", start_timeout_s=300) as dnsd:
            assert dnsd.proc is not None
            for i in range(500):
                ask(dnsd.port, f"lb{i}.{ZONE}")
                ask(dnsd.port, f"s{i * 97}.{ZONE}")
            print(f"10,000 LBs + 100,000 records: RSS after 1,000 distinct queries "
                  f"{rss_mib(dnsd.proc.pid):.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
