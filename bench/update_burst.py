"""1,000 TSIG-signed UPDATEs in a burst while a client asks for a cached answer.

    python bench/update_burst.py [--runs 3] [--updates 1000]

A real `dnsd serve` (the CLI defaults, response rate limiting off: one client sends
everything from 127.0.0.1) on the repository's zones, with `example.test` granting the key
`acme` `_acme-challenge` TXT. A prober, a process of its own, asks for a cached answer
(`www.example.test A`, the geo-steered name) up to 500 times a second; after 1 s with
nothing else going on, `--updates` UPDATEs, each adding one TXT value at one of ten
`_acme-challenge` names, are sent over UDP as fast as this process can send them (from 20
sockets), and every reply is awaited (60 s at most) and its TSIG checked. Reported per
run: the prober's p50 and p99 round trip while the burst is applied (first UPDATE sent →
last reply) and in the second before it, UPDATEs answered NOERROR, otherwise and not at
all, values served afterwards (asked over TCP: every one applied, none lost) and the
burst's duration; then the median of the runs. dnsd runs on core 0, the clients on core 1
(when there are two). Everything is on 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.tsig
import dns.tsigkeyring
import dns.update

sys.path.insert(0, str(Path(__file__).parent.parent))
from dnsd.drill.process import DnsdProcess

ROOT = Path(__file__).parent.parent
PROBE_RATE = 500  # cached queries a second
NAMES = 10  # the UPDATEs spread their values over this many owner names
SOCKETS = 20
GRANT = """
update:
  - key: acme
    names: ["_acme-challenge", "_acme-challenge.*"]
    types: [TXT]
"""


def config(directory: Path) -> tuple[Path, str]:
    zones = directory / "zones"
    shutil.copytree(ROOT / "zones", zones)
    secret = base64.b64encode(os.urandom(32)).decode()
    (zones / "acme.b64").write_text(secret + "\n")
    (zones / "keys.yaml").write_text(
        "tsig_keys:\n  acme: {algorithm: hmac-sha256, secret_file: acme.b64}\n"
    )
    with open(zones / "example.test.yaml", "a") as handle:
        handle.write(GRANT)
    return zones, secret


class Prober:
    """Asks for a cached answer PROBE_RATE times a second, from a process of its own (so
    this one's work on the burst does not delay its answers): (time sent, round trip in ms
    or None when unanswered within 0.5 s)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.samples: list[tuple[float, float | None]] = []
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._ours, theirs = context.Pipe()
        self._process = context.Process(target=probe, args=(port, self._stop, theirs))

    def start(self) -> None:
        self._process.start()

    def stop(self) -> None:
        self._stop.set()
        self.samples = self._ours.recv()
        self._process.join(10)

    def window(self, start: float, end: float) -> dict[str, float]:
        inside = [rtt for sent, rtt in self.samples if start <= sent <= end]
        times = sorted(rtt for rtt in inside if rtt is not None)
        if not times:
            return {"p50_ms": float("nan"), "p99_ms": float("nan"), "probes": 0, "lost": 0}
        lost = len(inside) - len(times)
        p50, p99 = (times[min(len(times) - 1, int(len(times) * q))] for q in (0.5, 0.99))
        return {"p50_ms": p50, "p99_ms": p99, "probes": len(times), "lost": lost}


def probe(port: int, stop: Any, out: Any) -> None:
    query = bytearray(dns.message.make_query("www.example.test.", "A").to_wire())
    samples: list[tuple[float, float | None]] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.2", 0))
        sock.settimeout(0.5)
        ident = 0
        while not stop.is_set():
            ident = (ident + 1) & 0xFFFF
            query[0:2] = ident.to_bytes(2, "big")
            sent = time.monotonic()  # the same clock in every process
            started = time.perf_counter()
            sock.sendto(bytes(query), ("127.0.0.1", port))
            try:
                while sock.recv(4096)[:2] != query[:2]:
                    pass
                samples.append((sent, (time.perf_counter() - started) * 1000))
            except TimeoutError:
                samples.append((sent, None))
            time.sleep(max(0.0, 1 / PROBE_RATE - (time.perf_counter() - started)))
    out.send(samples)


def burst(port: int, secret: str, count: int) -> dict[str, float]:
    """`count` UPDATEs over UDP, as fast as they can be sent; every reply awaited."""
    ring = {dns.name.from_text("acme"): dns.tsig.Key("acme", secret, dns.tsig.HMAC_SHA256)}
    updates = []
    for i in range(count):
        update = dns.update.UpdateMessage("example.test.", keyring=ring, keyname="acme")
        update.id = i % 65_536
        update.add(f"_acme-challenge.b{i % NAMES}.example.test.", 60, "TXT", f"value-{i}")
        updates.append((update, update.to_wire()))
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(SOCKETS)]
    replies: dict[int, bytes] = {}
    try:
        for sock in socks:
            sock.bind(("127.0.0.3", 0))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        started = time.monotonic()
        for i, (_, wire) in enumerate(updates):
            socks[i % SOCKETS].sendto(wire, ("127.0.0.1", port))
        deadline = started + 60
        for s, sock in enumerate(socks):
            mine = {i for i in range(s, count, SOCKETS)}
            while mine - replies.keys() and time.monotonic() < deadline:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    reply = sock.recv(4096)
                except TimeoutError:
                    break
                ident = int.from_bytes(reply[:2], "big")
                match = [i for i in mine if i % 65_536 == ident]
                if match:
                    replies[match[0]] = reply
        ended = time.monotonic()
    finally:
        for sock in socks:
            sock.close()
    noerror = refused = 0
    for i, reply in replies.items():
        update = updates[i][0]  # the reply's TSIG checked against the UPDATE's
        message = dns.message.from_wire(reply, keyring=ring, request_mac=update.mac)
        assert message.had_tsig, "an unsigned reply"
        if message.rcode() == dns.rcode.NOERROR:
            noerror += 1
        else:
            refused += 1
    unanswered = count - len(replies)
    return {
        **{"started": started, "ended": ended, "burst_s": ended - started},
        **{"noerror": noerror, "refused": refused, "unanswered": unanswered},
    }


def served_values(port: int) -> int:
    total = 0
    for n in range(NAMES):
        query = dns.message.make_query(f"_acme-challenge.b{n}.example.test.", "TXT")
        response = dns.query.tcp(query, "127.0.0.1", port=port, timeout=10)
        total += sum(len(rrset) for rrset in response.answer)
    return total


def run_once(count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-update-") as tmp:
        zones, secret = config(Path(tmp))
        state = ("--state-dir", str(Path(tmp) / "state"), "--rrl-rate", "0")
        with DnsdProcess(zones, *state) as dnsd:
            assert dnsd.proc is not None
            if len(os.sched_getaffinity(0)) > 1:
                with contextlib.suppress(OSError, FileNotFoundError):
                    pin = ["taskset", "-apc", "0", str(dnsd.proc.pid)]  # every thread
                    subprocess.run(pin, capture_output=True, check=True)
            prober = Prober(dnsd.port)
            prober.start()
            time.sleep(1.0)
            quiet_from = time.monotonic()
            time.sleep(1.0)
            result = burst(dnsd.port, secret, count)
            time.sleep(0.2)
            prober.stop()
            quiet = prober.window(quiet_from, result["started"])
            during = prober.window(result["started"], result["ended"])
            served = served_values(dnsd.port)
    return {**result, **during, **{f"quiet_{k}": v for k, v in quiet.items()}, "served": served}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--updates", type=int, default=1000)
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {1})  # off the server's core
    runs = []
    for run in range(args.runs):
        r = run_once(args.updates)
        runs.append(r)
        print(line(f"run {run + 1}", r, args.updates), flush=True)
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    when = time.strftime("%Y-%m-%d")
    title = f"{args.updates} signed UPDATEs in a burst, {when}, median of {args.runs}"
    print("\n" + line(title, median, args.updates) + " (target: p99 ≤ 5 ms, nothing lost)")


def line(title: str, r: dict[str, float], count: int) -> str:
    cached = f"p50 {r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms"
    answered = f"{r['probes']:.0f} answered, {r['lost']:.0f} lost"
    updates = (
        f"{r['noerror']:.0f} NOERROR, {r['refused']:.0f} other, {r['unanswered']:.0f} unanswered"
    )
    return (
        f"{title}: burst {r['burst_s']:.2f} s; cached answers meanwhile {cached} ({answered}; "
        f"before: p99 {r['quiet_p99_ms']:.3f} ms); UPDATEs {updates}; "
        f"{r['served']:.0f} of {count} values served"
    )


if __name__ == "__main__":
    main()
