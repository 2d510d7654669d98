"""Benchmark: peak RSS of dnsd after N queries from random sources.

    python bench/memory_flood.py [--queries 1000000]

Queries come from sockets bound to random 127.a.b.c addresses (many /24 prefixes for the
rate limiter) and carry random ECS subnets (many addresses for the location cache), to
names that exist, do not exist, and are load-balanced. dnsd runs with its default rate
limiting. Loopback only; bounded by the query count.
"""

from __future__ import annotations

import argparse
import random
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))

from dnslib import EDNS0, DNSRecord, EDNSOption

from dnsd.drill.process import DnsdProcess

BATCH = 200


def rss_kib(pid: int) -> tuple[int, int]:
    fields = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":" in line
    )
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def query(rng: random.Random) -> bytes:
    name = rng.choice(
        [
            "www.example.test",
            "api.example.test",
            f"n{rng.randrange(10**9)}.mail.example.test",
            "mail.example.test",
        ]
    )
    q = DNSRecord.question(name)
    q.header.id = rng.randrange(65536)
    subnet = bytes([rng.randrange(1, 224), rng.randrange(256), rng.randrange(256)])
    q.add_ar(EDNS0(udp_len=1232, opts=[EDNSOption(8, b"\x00\x01\x18\x00" + subnet)]))
    return q.pack()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=1_000_000)
    args = parser.parse_args()
    rng = random.Random(1130)
    root = Path(__file__).parent.parent
    with DnsdProcess(root / "zones") as dnsd:
        pid = dnsd.proc.pid  # type: ignore[union-attr]
        start_rss, _ = rss_kib(pid)
        sent = answered = 0
        started = time.monotonic()
        samples = []
        while sent < args.queries:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
                s.bind(
                    (f"127.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}", 0)
                )
                s.settimeout(0.2)
                batch = min(BATCH, args.queries - sent)
                for _ in range(batch):
                    s.sendto(query(rng), ("127.0.0.1", dnsd.port))
                sent += batch
                for _ in range(batch):
                    try:
                        s.recv(4096)
                        answered += 1
                    except TimeoutError:
                        break
            if sent % 100_000 < BATCH:
                rss, hwm = rss_kib(pid)
                samples.append((sent, rss))
                print(
                    f"{sent:>9} queries  {time.monotonic() - started:6.0f}s  RSS {rss / 1024:6.1f} MiB  peak {hwm / 1024:6.1f} MiB",
                    flush=True,
                )
        rss, hwm = rss_kib(pid)
        elapsed = time.monotonic() - started
    print(f"dnsd memory under a random-source flood, {time.strftime('%Y-%m-%d')}")
    print(
        f"queries sent {sent}, replies {answered} (the rest held back by rate limiting or dropped), {elapsed:.0f}s, {sent / elapsed:.0f}/s"
    )
    print(
        f"RSS at start {start_rss / 1024:.1f} MiB, at end {rss / 1024:.1f} MiB, peak {hwm / 1024:.1f} MiB"
    )


if __name__ == "__main__":
    main()
