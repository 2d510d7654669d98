"""The cold path: questions a server has not seen before, dnsd beside gdnsd and Knot.

    python bench/coldpath.py [--runs 3] [--seconds 5] [--harness T,C,Q] [--skip-lb] [--only-lb]
                             [--skip-install]

Each server serves the same zone of 100,000 A records (`s0` … `s99999`) on core 0 and
dnsperf drives it from core 1 (the harness is tuned on gdnsd as in bench/peers.py, and
bench/responder.c shows the harness's own ceiling). Three streams, each run in alternating
order and reported as the median of `--runs`:

* cached: one name over and over;
* random: every query a new random name that does not exist (a random-subdomain flood);
* once: each of the 100,000 names once (dnsperf -n 1), from a fresh start.

Then dnsd alone: a cold pass over 10,000 load-balanced names (each once, fresh start)
against its own cached rate for those names, twice: each load balancer with a pool of its
own (one shape: alike but for the pools' names and addresses, dnsd/lb_shapes.py), and
10,000 load balancers configured alike sharing LB_CLASSES pools; either way a name's first
answer can come from its class's table (dnsd/lb_classes.py). Loopback only; every run ends
by itself.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import select
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dnslib import DNSRecord

sys.path.insert(0, str(Path(__file__).parent))

import peers
from peers import ZONE, dnsperf, serve

RECORDS = 100_000
LB_NAMES = 10_000
LB_CLASSES = 25  # the alike configuration: load balancer i answers from pool i % LB_CLASSES


def records() -> list[str]:
    return [
        f"s{i} 300 IN A 127.{1 + i // 65536}.{i // 256 % 256}.{i % 256}" for i in range(RECORDS)
    ]


def dnsd_big(d: Path, port: int) -> list[str]:
    (d / "zones").mkdir()
    (d / "zones" / f"{ZONE}.zone").write_text(peers.zone_file("\n".join(records())))
    (d / "zones" / "bench.yaml").write_text(f"zone: {ZONE}\nfile: {ZONE}.zone\n")
    return [sys.executable, "-m", "dnsd", "serve", str(d / "zones"), "--listen", f"127.0.0.1:{port}",
            "--admin", "off", "--rrl-rate", "0", "--state-dir", str(d / "state")]  # fmt: skip


def knot_big(d: Path, port: int) -> list[str]:
    cmd = peers.knot(d, port)
    (d / f"{ZONE}.zone").write_text(peers.zone_file("\n".join(records())))
    return cmd


def gdnsd_big(d: Path, port: int) -> list[str]:
    (d / "zones").mkdir()
    (d / "run").mkdir()
    (d / "state").mkdir()
    (d / "config").write_text(
        f"options => {{ listen => [ 127.0.0.1:{port} ], run_dir => {d}/run, "
        f"state_dir => {d}/state, udp_threads => 1, tcp_threads => 1 }}\n"
    )
    (d / "zones" / ZONE).write_text(peers.zone_file("\n".join(records())))
    return ["gdnsd", "-c", str(d), "start"]


def dnsd_lbs(d: Path, port: int, classes: int = LB_NAMES) -> list[str]:
    """10,000 load-balanced names, each on a load balancer of its own answering from pool
    i % classes (`classes` LB_NAMES: every one its own pool)."""
    (d / "zones").mkdir()
    lines = [f"zone: {ZONE}", f"soa: {{mname: ns1.{ZONE}., rname: h.{ZONE}.}}", "records:",
             f'  "@": {{NS: ns1.{ZONE}.}}', "  ns1: {A: 127.0.0.1}", "  static: {A: 127.0.0.80}"]  # fmt: skip
    lines += [f"  lb{i}: {{lb: w{i}}}" for i in range(LB_NAMES)]
    lines += ["pools:"] + [
        f"  p{i}: {{backends: [{{name: a, address: 127.0.9.{i % 250 + 1}}}]}}"
        for i in range(classes)
    ]
    lines += ["load_balancers:"] + [
        f"  w{i}: {{ttl: 30, default_pools: [p{i % classes}]}}" for i in range(LB_NAMES)
    ]
    (d / "zones" / "lbs.yaml").write_text("\n".join(lines) + "\n")
    return [sys.executable, "-m", "dnsd", "serve", str(d / "zones"), "--listen", f"127.0.0.1:{port}",
            "--admin", "off", "--rrl-rate", "0", "--state-dir", str(d / "state")]  # fmt: skip


def names_file(d: Path, lines: list[str], name: str) -> Path:
    path = d / name
    path.write_text("\n".join(lines) + "\n")
    return path


def stream(kind: str, seconds: int) -> Callable[[int, Path], dict[str, float]]:
    def run(port: int, d: Path) -> dict[str, float]:
        if kind == "cached":
            return dnsperf(port, names_file(d, [f"s7.{ZONE} A"] * 1000, "q.txt"), seconds)
        if kind == "random":  # more names than the run can ask: none asked twice
            rng = random.Random()
            lines = [f"r{rng.getrandbits(56):x}.{ZONE} A" for _ in range(400_000 * seconds)]
            return dnsperf(port, names_file(d, lines, "q.txt"), seconds)
        order = list(range(RECORDS))
        random.shuffle(order)
        return dnsperf(
            port, names_file(d, [f"s{i}.{ZONE} A" for i in order], "q.txt"), 0, ("-n", "1")
        )

    return run


def lb_names(d: Path) -> Path:
    order = list(range(LB_NAMES))
    random.shuffle(order)
    return names_file(d, [f"lb{i}.{ZONE} A" for i in order], "q.txt")


def lb_pass(cached: bool, seconds: int) -> Callable[[int, Path], dict[str, float]]:
    def run(port: int, d: Path) -> dict[str, float]:
        if cached:
            return dnsperf(port, lb_names(d), seconds)
        return dnsperf(port, lb_names(d), 0, ("-n", "1"))

    return run


def lb_warm(port: int, d: Path) -> None:
    """Before a cached run (not measured: neither its rate nor its CPU time): each once."""
    dnsperf(port, lb_names(d), 0, ("-n", "1"))


FLOOD_SOURCES = 8  # source /24s: 127.0.1.0/24 … 127.0.8.0/24
FLOOD_QPS = 48_000  # offered in all (open loop: dnsperf -Q)
PROBE_QPS = 200  # the legitimate client, asking a cached name


def flood(seconds: int) -> Callable[[int, Path], dict[str, float]]:
    """A random-name flood from FLOOD_SOURCES /24s while one client asks a cached name
    PROBE_QPS times a second: how many of its questions are answered, and how fast."""

    def run(port: int, d: Path) -> dict[str, float]:
        rng = random.Random()
        procs = []
        for k in range(1, FLOOD_SOURCES + 1):
            lines = [
                f"r{rng.getrandbits(56):x}.{ZONE} A"
                for _ in range(FLOOD_QPS // FLOOD_SOURCES * (seconds + 1))
            ]
            path = names_file(d, lines, f"flood{k}.txt")
            procs.append(subprocess.Popen(
                ["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-a", f"127.0.{k}.1",
                 "-d", str(path), "-l", str(seconds), "-Q", str(FLOOD_QPS // FLOOD_SOURCES), "-c", "4", "-q", "500"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))  # fmt: skip
        time.sleep(0.5)  # the flood is on
        latencies, asked = probe(port, seconds - 1)
        # What the flood really sent: dnsperf shares core 1 with the probe and seven others.
        sent = sum(
            _figure(proc.communicate(timeout=seconds + 30)[0], "Queries sent") for proc in procs
        )
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99)] * 1000 if latencies else float("nan")
        return {"qps": float(len(latencies)), "answered": len(latencies) / asked, "p99_ms": p99,
                "flood_qps": sent / seconds, "load": os.getloadavg()[0]}  # fmt: skip

    return run


def _figure(out: str, label: str) -> float:
    match = re.search(rf"{label}:\s+([\d.]+)", out)
    return float(match.group(1)) if match else 0.0


def probe(port: int, seconds: float) -> tuple[list[float], int]:
    """Ask `s7` PROBE_QPS times a second for `seconds` (each waited for up to 1 s)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    sent: dict[int, float] = {}
    latencies: list[float] = []
    start = time.perf_counter()
    asked = 0
    while (now := time.perf_counter()) - start < seconds or (sent and now - start < seconds + 1):
        if now - start < seconds and asked < (now - start) * PROBE_QPS:
            ident = asked % 65536
            query = DNSRecord.question(f"s7.{ZONE}")
            query.header.id = ident
            sock.sendto(query.pack(), ("127.0.0.1", port))
            sent[ident] = now
            asked += 1
        ready, _, _ = select.select([sock], [], [], 0.001)
        while ready:
            try:
                reply = sock.recv(4096)
            except BlockingIOError:
                break
            at = sent.pop(int.from_bytes(reply[:2], "big"), None)
            if at is not None:
                latencies.append(time.perf_counter() - at)
    sock.close()
    return latencies, asked


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--harness", help="THREADS,CLIENTS,INFLIGHT: skip tuning, use these")
    parser.add_argument("--skip-lb", action="store_true", help="skip the 10,000 LB names pass")
    parser.add_argument("--only-flood", action="store_true", help="only the flood latency runs")
    parser.add_argument("--only-lb", action="store_true", help="only the 10,000 LB names passes")
    parser.add_argument("--label", default="", help="a label for the LB lines (e.g. before)")
    parser.add_argument("--skip-install", action="store_true", help="gdnsd, Knot, dnsperf are here")
    parser.add_argument("--server-cpu", type=float, help="each server's share of its core (0.5)")
    args = parser.parse_args()
    peers.SERVER_CPU = args.server_cpu
    if not args.skip_install:
        peers.install()  # the peers and dnsperf (Debian packages; services not started)
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {1})
    if args.only_lb:
        if args.harness:
            peers.HARNESS = peers.Harness(*(int(x) for x in args.harness.split(",")))
        lb_passes(args.runs, args.seconds, args.label)
        return
    if args.harness:
        peers.HARNESS = peers.Harness(*(int(x) for x in args.harness.split(",")))
    else:
        peers.tune_harness()
    servers = {"dnsd": dnsd_big, "gdnsd": gdnsd_big, "knot": knot_big}
    table: dict[str, dict[str, list[float]]] = {}
    cpu: dict[str, dict[str, list[float]]] = {}  # CPU µs per answer: what a core costs
    rss: dict[str, list[float]] = {}
    for kind in () if args.only_flood else ("cached", "random", "once"):
        for _ in range(args.runs):  # alternating: every server once per round
            for name, build in servers.items():
                result = serve(f"{name} {kind}", build, stream(kind, args.seconds))
                qps = result["qps"] if result else float("nan")
                table.setdefault(kind, {}).setdefault(name, []).append(qps)
                us = result["cpu_us"] if result else float("nan")
                cpu.setdefault(kind, {}).setdefault(name, []).append(us)
                rss.setdefault(name, []).append(result["rss_mib"] if result else float("nan"))
                print(f"  {kind:<7} {name:<6} {qps:>10.0f} QPS", file=sys.stderr)
    ceiling = serve("responder", peers.responder, stream("cached", args.seconds))
    share = f" ({peers.SERVER_CPU:.0%} of it: a cgroup quota)" if peers.SERVER_CPU else ""
    print(f"\ncold path, {peers.HARNESS}, server on core 0{share}, median of {args.runs}; harness "
          f"ceiling (bench/responder.c, one name) {ceiling['qps'] if ceiling else float('nan'):.0f} QPS")  # fmt: skip
    print(f"{'stream':<8} {'dnsd':>10} {'gdnsd':>10} {'knot':>10} {'÷ gdnsd':>8} {'÷ knot':>8}  "
          f"{'CPU µs/answer: dnsd, gdnsd, knot':>34}  runs (dnsd)")  # fmt: skip
    for kind, row in table.items():
        med = {name: statistics.median(v) for name, v in row.items()}
        us = {name: statistics.median(v) for name, v in cpu[kind].items()}
        print(f"{kind:<8} {med['dnsd']:>10.0f} {med['gdnsd']:>10.0f} {med['knot']:>10.0f} "
              f"{med['dnsd'] / med['gdnsd']:>8.2f} {med['dnsd'] / med['knot']:>8.2f}  "
              f"{us['dnsd']:>12.2f} {us['gdnsd']:>10.2f} {us['knot']:>10.2f}  "
              f"{[round(x) for x in row['dnsd']]}")  # fmt: skip
    if rss:
        print("RSS after the runs (median): " + ", ".join(
            f"{name} {statistics.median(v):.0f} MiB" for name, v in rss.items()))  # fmt: skip
    flooded: dict[str, list[dict[str, float]]] = {"dnsd": [], "knot": []}
    for _ in range(args.runs):  # alternating, as the streams: the machine's load moves
        for name, build in (("dnsd", dnsd_big), ("knot", knot_big)):
            if r := serve(f"{name} flood", build, flood(args.seconds)):
                flooded[name].append(r)
                print(f"  flood {name:<6} answered {r['answered']:.4f} p99 {r['p99_ms']:.2f} ms, the "
                      f"flood sent {r['flood_qps']:.0f} QPS, load average {r['load']:.1f}", file=sys.stderr)  # fmt: skip
    for name, done in flooded.items():
        print(f"{name}: a cached name asked {PROBE_QPS}/s during a {FLOOD_QPS} QPS random-name flood "
              f"from {FLOOD_SOURCES} /24s: answered {min(r['answered'] for r in done):.4f} (worst run), "
              f"p99 {statistics.median(r['p99_ms'] for r in done):.2f} ms (median), RSS "
              f"{statistics.median(r['rss_mib'] for r in done):.0f} MiB")  # fmt: skip
    if args.skip_lb:
        return
    lb_passes(args.runs, args.seconds, args.label)


def lb_passes(runs: int, seconds: int, label: str) -> None:
    """The cold pass and the cached rate over 10,000 LB names, alternating, median of
    `runs`, with the server's CPU time per answer (µs) and the load average."""
    configs = {
        "own pools": dnsd_lbs,
        f"alike ({LB_CLASSES} classes)": lambda d, port: dnsd_lbs(d, port, LB_CLASSES),
    }
    for kind, build in configs.items():
        cold, warm = [], []
        for _ in range(runs):  # alternating: a cold pass, then a cached run
            cold.append(serve(f"dnsd lb cold {kind}", build, lb_pass(False, seconds)))
            warm.append(serve(f"dnsd lb cached {kind}", build, lb_pass(True, seconds), lb_warm))
        done_cold, done_warm = [r for r in cold if r], [r for r in warm if r]
        cold_qps = statistics.median(r["qps"] for r in done_cold)
        warm_qps = statistics.median(r["qps"] for r in done_warm)
        cold_us = statistics.median(r["cpu_us"] for r in done_cold)
        warm_us = statistics.median(r["cpu_us"] for r in done_warm)
        runs_text = (
            f"cold {[round(r['qps']) for r in done_cold]}, "
            f"cached {[round(r['qps']) for r in done_warm]}"
        )
        print(
            f"{label}10,000 LB names, {kind}: a cold pass {cold_qps:.0f} QPS "
            f"({cold_us:.1f} µs CPU per answer), cached {warm_qps:.0f} QPS ({warm_us:.1f} µs): "
            f"{cold_qps / warm_qps:.3f}× (target ≥ 0.25), at saturation (CPU cached ÷ cold) "
            f"{warm_us / cold_us:.3f}×; runs: {runs_text}; load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
