"""Benchmark: RSS of `dnsd serve` on big zones, and how long a 1,000,000-record zone loads.

    python3 bench/memory_zone.py [--only zone|big|million] [--million 1000000]

* zone: the 100,000 A records of bench/coldpath.py (`s0` … `s99999`), RSS once the
  server answers and again after each name was asked once (target ≤ 120 MB);
* big: bench/bigconfig.py's 10,000 load-balanced names + 100,000 records (target ≤ 150 MB);
* million: bench/zonefile_load.py's zone of the common record kinds with 1,000,000
  records, the seconds from `dnsd serve` starting to its first answer (target ≤ 60 s).

Loopback only; every run ends by itself. Memory does not depend on the machine's load,
time does: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from dnslib import DNSRecord

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bigconfig  # noqa: E402
import coldpath  # noqa: E402
import peers  # noqa: E402
import zonefile_load  # noqa: E402

from dnsd.drill.process import DnsdProcess  # noqa: E402


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` so far (less load-dependent than wall time)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ask(port: int, names: list[str]) -> int:
    """Each name once (A), at most 500 outstanding; the number answered."""
    answered = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        s.settimeout(2.0)
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            for name in chunk:
                s.sendto(DNSRecord.question(name).pack(), ("127.0.0.1", port))
            for _ in chunk:
                try:
                    s.recv(4096)
                    answered += 1
                except TimeoutError:
                    break
    return answered


def serve_rss(d: Path, names: list[str], label: str, target: int) -> None:
    started = time.perf_counter()
    with DnsdProcess(d, "--admin", "off", "--rrl-rate", "0", start_timeout_s=900) as proc:
        assert proc.proc is not None
        took = time.perf_counter() - started
        time.sleep(2.0)  # what is built after the ports open (serials, the loops) settles
        listening = rss_mib(proc.proc.pid)
        answered = ask(proc.port, names)
        asked = rss_mib(proc.proc.pid)
    print(
        f"{label}: answering after {took:.1f} s; RSS {listening:.0f} MiB "
        f"({listening * 1.048576:.0f} MB) once answering, {asked:.0f} MiB "
        f"({asked * 1.048576:.0f} MB) after {answered} of {len(names)} names asked once "
        f"(target ≤ {target} MB)",
        flush=True,
    )


def zone(tmp: Path) -> None:
    d = tmp / "zone"
    d.mkdir()
    (d / f"{peers.ZONE}.zone").write_text(peers.zone_file("\n".join(coldpath.records())))
    (d / "bench.yaml").write_text(f"zone: {peers.ZONE}\nfile: {peers.ZONE}.zone\n")
    names = [f"s{i}.{peers.ZONE}." for i in range(coldpath.RECORDS)]
    serve_rss(d, names, f"{coldpath.RECORDS} A records", 120)


def big(tmp: Path) -> None:
    d = tmp / "big"
    bigconfig.write_config(d, 10_000, 100_000, 20)
    names = [f"s{i}.{bigconfig.ZONE}." for i in range(0, 100_000, 10)]
    names += [f"lb{i}.{bigconfig.ZONE}." for i in range(0, 10_000, 10)]
    serve_rss(d, names, "10,000 LB names + 100,000 records", 150)


def million(tmp: Path, records: int) -> None:
    d = tmp / "million"
    d.mkdir()
    zonefile_load.write_zone(d, records)
    size = (d / "bench.zone").stat().st_size / 1e6
    before = os.getloadavg()[0]
    started = time.perf_counter()
    with DnsdProcess(d, "--admin", "off", "--rrl-rate", "0", start_timeout_s=900) as proc:
        assert proc.proc is not None
        took = time.perf_counter() - started
        cpu = cpu_s(proc.proc.pid)
        rss = rss_mib(proc.proc.pid)
        answered = ask(proc.port, [f"h{records - 8}.{zonefile_load.ORIGIN}"])
    print(
        f"{records + 1} records ({size:.0f} MB zone file): dnsd serve answering after "
        f"{took:.1f} s, {cpu:.1f} s of CPU (target ≤ 60 s), RSS {rss:.0f} MiB, {answered} answer to a last "
        f"name; load average {before:.1f} before, {os.getloadavg()[0]:.1f} after on "
        f"{os.cpu_count()} CPUs",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("zone", "big", "million"))
    # zonefile_load's zone of N has N + 1 records (SOA, NS, ns1's A, N - 2 more): 999,999
    # is exactly dnsd's limit of 1,000,000 records per zone.
    parser.add_argument("--million", type=int, default=999_999, help="records of the big load")
    args = parser.parse_args()
    print(f"dnsd memory on big zones, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "zone"):
            zone(Path(tmp))
        if args.only in (None, "big"):
            big(Path(tmp))
        if args.only in (None, "million"):
            million(Path(tmp), args.million)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
