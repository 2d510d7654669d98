"""Benchmark: loading a big RFC 1035 zone file. Loopback only, bounded.

    python bench/zonefile_load.py [--records 100000] [--runs 3]

1. `dnsd check` on a directory whose one zone is a file of N records, against dnspython's
   own `dns.zone.from_file` on the same file: each a fresh process, alternating, the ratio
   as the median of the runs (target: at most 2).
2. `dnsd serve` starts on a small version of the zone, the big file is put in its place
   and SIGHUP reloads it; meanwhile a probe sends a DNS query and an admin GET /healthz
   every 10 ms and records how long each takes to be answered. The longest wait while the
   reload runs is the event loop's longest stall (target: at most 50 ms).
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))

from dnslib import DNSRecord

from tests.processes import DnsdProcess

ORIGIN = "bench.test."
ROOT = Path(__file__).parent.parent


def zone_text(records: int) -> str:
    """An SOA, apex NS, then `records` records of the common kinds, ~60 bytes a line."""
    lines = [f"$ORIGIN {ORIGIN}", "$TTL 300",
             "@ IN SOA ns1 hostmaster 1 3600 600 86400 300", "@ IN NS ns1", "ns1 IN A 192.0.2.1"]  # fmt: skip
    for i in range(records - 2):
        kind = i % 5
        if kind == 0:
            lines.append(f"h{i} IN A 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}")
        elif kind == 1:
            lines.append(f"h{i} IN AAAA 2001:db8::{i >> 16 & 0xFFFF:x}:{i & 0xFFFF:x}")
        elif kind == 2:
            lines.append(f'h{i} 60 IN TXT "v=spf1 ip4:10.0.{i & 255}.0/24 -all" "record {i}"')
        elif kind == 3:
            lines.append(f"h{i} IN MX 10 mail{i % 97}.example.net.")
        else:
            lines.append(f"www{i} IN CNAME h{i - 4}")
    return "\n".join(lines) + "\n"


def write_zone(directory: Path, records: int, changed: bool = False) -> Path:
    (directory / "bench.yaml").write_text(f"zone: {ORIGIN}\nfile: bench.zone\n")
    path = directory / "bench.zone"
    tmp = directory / ".bench.zone.tmp"
    text = zone_text(records)
    tmp.write_text(text.replace("h0 IN A 10.0.0.0", "h0 IN A 10.255.0.0") if changed else text)
    tmp.replace(path)
    return path


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, timeout=1200)
    return time.perf_counter() - started


def check_against_dnspython(directory: Path, runs: int) -> None:
    zone = directory / "bench.zone"
    dnspython = [sys.executable, "-c", "import sys, dns.zone; dns.zone.from_file(sys.argv[1], "
                 f"origin={ORIGIN!r}, relativize=False)", str(zone)]  # fmt: skip
    dnsd = [sys.executable, "-m", "dnsd", "check", str(directory)]
    ratios = []
    for run in range(runs):
        ours = timed(dnsd)
        theirs = timed(dnspython)
        ratios.append(ours / theirs)
        print(f"  run {run + 1}: dnsd check {ours:.2f} s, dns.zone.from_file {theirs:.2f} s, "
              f"ratio {ours / theirs:.2f}", flush=True)  # fmt: skip
    print(f"dnsd check ÷ dns.zone.from_file: median {statistics.median(ratios):.2f} "
          "(target ≤ 2)", flush=True)  # fmt: skip


class Probe(threading.Thread):
    """A DNS query and an admin GET every `every_s`: the time each took to be answered."""

    def __init__(self, dns_port: int, admin_port: int, every_s: float = 0.010) -> None:
        super().__init__(daemon=True)
        self.dns_port, self.admin_port, self.every_s = dns_port, admin_port, every_s
        self.samples: list[tuple[float, float, float]] = []  # (sent at, dns s, admin s)
        self.failures = 0
        self.done = threading.Event()

    def run(self) -> None:
        wire = DNSRecord.question("ns1." + ORIGIN).pack()
        admin = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=10)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.settimeout(10)
            while not self.done.is_set():
                sent = time.perf_counter()
                try:
                    udp.sendto(wire, ("127.0.0.1", self.dns_port))
                    udp.recv(4096)
                    dns_s = time.perf_counter() - sent
                    started = time.perf_counter()
                    admin.request("GET", "/healthz")
                    admin.getresponse().read()
                    admin_s = time.perf_counter() - started
                except OSError:
                    self.failures += 1
                    admin = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=10)
                    continue
                self.samples.append((sent, dns_s, admin_s))
                time.sleep(max(0.0, self.every_s - (time.perf_counter() - sent)))


def busy_thread_gaps(seconds: float) -> float:
    """The control: the longest a thread waiting 1 ms at a time waits here, while another
    thread of its process runs plain Python (no dnsd). On an idle multi-core machine this
    is a few ms (the GIL's 5 ms switch interval); where the CPUs are oversubscribed, the
    busy thread is preempted while it holds the GIL and every thread of the process waits
    for it to be scheduled again: the floor of any stall a threaded reload can reach."""
    done = threading.Event()

    def busy() -> None:
        total, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            total += 1
        done.set()

    threading.Thread(target=busy).start()
    last, worst = time.perf_counter(), 0.0
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        worst, last = max(worst, now - last), now
    return worst * 1000


def loader_share(directory: Path, records: int) -> None:
    """In this process: the load a reload runs (dnsd.loading.load_snapshot) on a thread,
    and a ticker waiting 1 ms at a time. For each gap in the ticks, the CPU time the
    loading thread used within it (its own CPU clock) bounds how much of the gap its
    running could have caused; the rest is time this process was not scheduled at all
    (an oversubscribed machine). The largest such share is the stall the load itself
    makes, whatever else runs on the machine."""
    from dnsd.loading import load_snapshot

    write_zone(directory, records)
    started = threading.Event()
    done = threading.Event()
    ident: list[int] = []

    def load() -> None:
        ident.append(threading.get_ident())
        started.set()
        load_snapshot(directory, 1)
        done.set()

    threading.Thread(target=load, daemon=True).start()
    started.wait()
    clock = time.pthread_getcpuclockid(ident[0])
    wall, cpu = time.perf_counter(), time.clock_gettime(clock)
    gaps: list[tuple[float, float]] = []  # (gap ms, the loader's CPU ms within it)
    began = wall
    while not done.is_set():
        time.sleep(0.001)
        try:
            now_cpu = time.clock_gettime(clock)
        except OSError:  # the thread has ended
            break
        now = time.perf_counter()
        gaps.append(((now - wall) * 1000, min(now_cpu - cpu, now - wall) * 1000))
        wall, cpu = now, now_cpu
    print(f"in-process load of {records} records: {time.perf_counter() - began:.1f} s, "
          f"{len(gaps)} ticks")  # fmt: skip
    print(f"  longest gap {max(g for g, _ in gaps):.1f} ms; largest share of a gap the "
          f"loading thread was running: {max(c for _, c in gaps):.1f} ms (target ≤ 50)")  # fmt: skip
    worst = sorted(gaps, reverse=True)[:5]
    print("  the 5 longest gaps (loader CPU within): " + ", ".join(
        f"{g:.0f} ms ({c:.0f})" for g, c in worst))  # fmt: skip


def renice(pid: int, nice: int) -> None:
    """Every thread of `pid` (Linux keeps a nice value per thread; new ones inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.setpriority(os.PRIO_PROCESS, int(task.name), nice)


def reload_stall(directory: Path, records: int, nice: int | None) -> None:
    """Two reloads under the probe: small → the big file, then big → the big file with
    one record changed (the old big snapshot is let go as the new one comes in)."""
    write_zone(directory, 100)
    with DnsdProcess(directory, "--rrl-rate", "0", "--state-dir", str(directory / "state")) as dnsd:
        if nice is not None:
            assert dnsd.proc is not None
            renice(dnsd.proc.pid, nice)
            renice(os.getpid(), nice)
            print(f"server and probe at nice {nice} (the other processes of a shared machine "
                  "then wait for them, as on a machine of its own)")  # fmt: skip
        time.sleep(0.5)
        probe = Probe(dnsd.port, dnsd.admin_port)
        probe.start()
        time.sleep(5.0)  # the noise floor: the same probe with no reload running
        idle = [max(s[1], s[2]) * 1000 for s in probe.samples]
        print(f"no reload (5 s, {len(idle)} probes): longest wait {max(idle):.1f} ms, "
              f"p99 {statistics.quantiles(idle, n=100)[98]:.2f} ms")  # fmt: skip
        for reload in (1, 2):
            write_zone(directory, records, changed=reload == 2)
            started = time.perf_counter()
            dnsd.signal(signal.SIGHUP)
            deadline = time.monotonic() + 1200
            while sum(": reloaded " in line for line in dnsd.lines) < reload:
                assert time.monotonic() < deadline, dnsd.output
                time.sleep(0.01)
            reload_s = time.perf_counter() - started
            time.sleep(0.5)
            during = [s for s in probe.samples if started <= s[0] <= started + reload_s]
            assert during, "no probe during the reload"
            report(f"reload {reload} ({'small' if reload == 1 else 'big'} → {records} records)",
                   reload_s, during, started)  # fmt: skip
        probe.done.set()
        probe.join()
        print(f"  probes that failed: {probe.failures}")
        answered = subprocess.run(
            ["dig", "@127.0.0.1", "-p", str(dnsd.port), f"h{records - 8}.{ORIGIN}", "TXT",
             "+short", "+tries=1", "+time=2"], capture_output=True, text=True, timeout=10,
        ).stdout.strip()  # fmt: skip
        print(f"  after the reloads, h{records - 8} TXT: {answered[:60]}")
        print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def report(label: str, reload_s: float, during: list[tuple[float, float, float]],
           started: float) -> None:  # fmt: skip
    dns_ms = [s[1] * 1000 for s in during]
    admin_ms = [s[2] * 1000 for s in during]
    print(f"{label}: {reload_s:.1f} s; {len(during)} probes during it")
    for name, values in (("DNS query", dns_ms), ("admin /healthz", admin_ms)):
        q = statistics.quantiles(values, n=100)
        print(f"  {name:<15} p50 {q[49]:.2f} ms  p99 {q[98]:.2f} ms  max {max(values):.2f} ms")
    worst = max(max(dns_ms), max(admin_ms))
    print(f"  longest stall during the reload: {worst:.1f} ms (target ≤ 50)")
    slowest = sorted(during, key=lambda s: -max(s[1], s[2]))[:5]
    print("  the 5 longest, at seconds into the reload: " + ", ".join(
        f"{max(s[1], s[2]) * 1000:.0f} ms @{s[0] - started:.2f}" for s in slowest))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("check", "reload", "share"), help="one part")
    parser.add_argument("--nice", type=int, help="run the server and the probe at this nice")
    args = parser.parse_args()
    print(f"dnsd zone-file load benchmark, {time.strftime('%Y-%m-%d')}, "
          f"{multiprocessing.cpu_count()} cores, {args.records} records")  # fmt: skip
    if args.only in (None, "check"):
        with tempfile.TemporaryDirectory() as tmp:
            write_zone(Path(tmp), args.records)
            size = (Path(tmp) / "bench.zone").stat().st_size
            print(f"zone file: {size / 1e6:.1f} MB", flush=True)
            check_against_dnspython(Path(tmp), args.runs)
    if args.only in (None, "share"):
        with tempfile.TemporaryDirectory() as tmp:
            loader_share(Path(tmp), args.records)
    if args.only in (None, "reload"):
        with tempfile.TemporaryDirectory() as tmp:
            reload_stall(Path(tmp), args.records, args.nice)
        print(f"control, no dnsd: a 1 ms ticker beside a busy Python thread waits at most "
              f"{busy_thread_gaps(10.0):.1f} ms (load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs)")  # fmt: skip


if __name__ == "__main__":
    main()
