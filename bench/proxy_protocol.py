"""The compiled loop's rate behind PROXY v2 against without (issue: ≥ 0.8×).

One `dnsd serve --serving-loop compiled` answers the same cached name, once plainly and
once with `--proxy-protocol-from 127.0.0.1/32` and a PROXY v2 header (a client at
81.2.69.142) on every query. The client keeps WINDOW queries in flight for SECONDS and
counts the replies; the two servers in turns, median of 5 each. Run: PYTHONPATH=. python3 bench/proxy_protocol.py
"""

from __future__ import annotations

import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from dnslib import DNSRecord

from dnsd.drill.process import DnsdProcess
from dnsd.net.proxy_protocol import SIGNATURE

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.geo_fixture import write_city_db  # noqa: E402

WINDOW, SECONDS, ROUNDS = 64, 2.0, 5


def header(src: str) -> bytes:
    body = socket.inet_aton(src) + socket.inet_aton("127.0.0.1") + struct.pack("!HH", 4000, 53)
    return SIGNATURE + b"\x21\x12" + struct.pack("!H", len(body)) + body


def rate(port: int, prefix: bytes) -> float:
    wire = DNSRecord.question("www.geo.test").pack()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("127.0.0.1", port))
        s.settimeout(0.2)
        datagram = prefix + wire
        for _ in range(WINDOW):
            s.send(datagram)
        answered, end = 0, time.monotonic() + SECONDS
        while time.monotonic() < end:
            try:
                s.recv(4096)
            except TimeoutError:  # a lost one: refill the window
                for _ in range(WINDOW):
                    s.send(datagram)
                continue
            answered += 1
            s.send(datagram)
    return answered / SECONDS


def main() -> None:
    """Both servers up at once, measured in turns (the machine's other load hits both)."""
    with tempfile.TemporaryDirectory() as tmp:
        city = str(write_city_db(Path(tmp) / "city.mmdb"))
        base = ("--geoip", city, "--serving-loop", "compiled", "--rrl-rate", "0")
        zones = ROOT / "tests" / "data" / "geo"
        proxied = ("--proxy-protocol-from", "127.0.0.1/32")
        with DnsdProcess(zones, *base) as plain, DnsdProcess(zones, *base, *proxied) as proxy:
            modes = {"plain": (plain.port, b""), "proxy": (proxy.port, header("81.2.69.142"))}
            runs: dict[str, list[float]] = {mode: [] for mode in modes}
            for port, prefix in modes.values():
                rate(port, prefix)  # warm: the first query fills the cache
            for _ in range(ROUNDS):
                for mode, (port, prefix) in modes.items():
                    runs[mode].append(rate(port, prefix))
        for mode, rs in runs.items():
            print(f"{mode}: {' / '.join(f'{r:.0f}' for r in rs)} answers/s", flush=True)
        ratio = statistics.median(runs["proxy"]) / statistics.median(runs["plain"])
        print(f"proxy / plain (medians of {ROUNDS}): {ratio:.2f}")


if __name__ == "__main__":
    main()
