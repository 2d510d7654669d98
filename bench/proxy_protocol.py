"""The compiled loop's rate behind PROXY v2 against without (target: ≥ 0.8×).

    python bench/proxy_protocol.py [--runs 3] [--seconds 5] [--sockets 20] [--window 10]

dnsd serves bench/peers.py's zone with its compiled loop on core 0, once plainly and once
with `--proxy-protocol-from 127.0.0.2/32`; bench/proxy_sender.c (compiled here: dnsperf
cannot send PROXY headers) asks from 127.0.0.2 on core 1 for the load-balanced name over
and over, with a PROXY v2 header (a client at 81.2.69.142) on every query for the second.
The two alternate, `--runs` rounds; printed: the median replies per second of each, their
ratio, and the server's CPU time per answer (/proc/PID/stat: what each needs of its core;
its inverse ratio is the rate ratio at saturation). The sender's own ceiling is its rate
against bench/responder.c (which does no DNS work). Loopback only; every run ends by itself.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from dnslib import DNSRecord

sys.path.insert(0, str(Path(__file__).parent))

import peers
from peers import ROOT, ZONE, serve

SENDER = "127.0.0.2"  # the balancer: the only peer allowed to send headers
CLIENT = "81.2.69.142"  # the client its headers carry
SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def header(client: str) -> bytes:
    """A PROXY v2 header: PROXY command, IPv4 over UDP, `client`:4000 → 127.0.0.1:53."""
    body = socket.inet_aton(client) + socket.inet_aton("127.0.0.1") + struct.pack("!HH", 4000, 53)
    return SIGNATURE + b"\x21\x12" + struct.pack("!H", len(body)) + body


def compiled(build: Callable[[Path, int], list[str]]) -> Callable[[Path, int], list[str]]:
    """The same dnsd, refusing to start without its compiled loop."""
    return lambda d, port: [*build(d, port), "--serving-loop", "compiled"]


def proxied(d: Path, port: int) -> list[str]:
    return [*peers.dnsd(d, port), "--proxy-protocol-from", f"{SENDER}/32"]


def sender(d: Path) -> Path:
    binary = d / "proxy_sender"
    source = ROOT / "bench" / "proxy_sender.c"
    subprocess.run(["cc", "-O2", "-o", str(binary), str(source)], check=True)
    return binary


def drive(
    seconds: int, sockets: int, window: int, prefix: bytes
) -> Callable[[int, Path], dict[str, float]]:
    """What peers.serve measures: the sender's replies per second, the answers counted."""
    query = DNSRecord.question(f"www.{ZONE}").pack()

    def run(port: int, d: Path) -> dict[str, float]:
        cmd = [
            "taskset",
            "-c",
            "1",
            str(sender(d)),
            str(port),
            str(seconds),
            str(sockets),
            str(window),
            query.hex(),
            *([prefix.hex()] if prefix else []),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout
        answered, took = out.split()[1], out.split()[3]
        return {"qps": int(answered) / float(took), "sent": float(answered), "lost": 0.0}

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--sockets", type=int, default=20)
    parser.add_argument("--window", type=int, default=10, help="queries in flight per socket")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {1})  # this script stays off the server's core
    variants = {
        name: (compiled(build), drive(args.seconds, args.sockets, args.window, prefix))
        for name, (build, prefix) in {
            "plain": (peers.dnsd, b""),
            "proxy": (proxied, header(CLIENT)),
        }.items()
    }
    results = peers.alternate(variants, args.runs)
    ceiling = serve(
        "responder", peers.responder, drive(args.seconds, args.sockets, args.window, b"")
    )
    qps, cpu = peers.medians(results, "qps"), peers.medians(results, "cpu_us")
    print(
        f"\nPROXY v2, bench/proxy_sender.c ({args.sockets} sockets × {args.window} in flight) "
        f"on core 1, dnsd (compiled loop) on core 0, median of {args.runs}, load average "
        f"{os.getloadavg()[0]:.2f}; the sender's ceiling (bench/responder.c) "
        f"{ceiling['qps'] if ceiling else float('nan'):.0f} answers/s"
    )
    for name, rs in results.items():
        runs = " / ".join(f"{r['qps']:.0f}" for r in rs)
        print(
            f"{name:<5}: {qps[name]:>9.0f} answers/s, {cpu[name]:.2f} µs CPU per answer; runs {runs}"
        )
    print(
        f"proxy ÷ plain: {qps['proxy'] / qps['plain']:.2f} (target ≥ 0.8); at saturation "
        f"(CPU per answer, plain ÷ proxy): {cpu['plain'] / cpu['proxy']:.2f}"
    )


if __name__ == "__main__":
    main()
