"""Benchmark dnsd side by side with gdnsd, Knot and PowerDNS.

    python bench/peers.py [--runs 3] [--seconds 10] [--skip-install]

Installs dnsperf, gdnsd, knot and pdns-server from Debian if missing (no service is
started: policy-rc.d), serves the same zone from each on a loopback port — a load-balanced
name (gdnsd metafo, PowerDNS LUA pickrandom, Knot static records as the ceiling, dnsd
`off` steering; and bench/floor.py, a Python loop answering precomputed bytes, as the floor
of what Python costs) plus a static name and NXDOMAINs — pins the server to core 0 and dnsperf
to core 1, runs each three times and prints the median QPS, average latency, lost queries
and dnsd's ratio to each peer. Then: ECS from 10,000 random /24s (geo steering,
location-dependent answers; dnsd and gdnsd's geoip plugin on the same City database; dnsperf
-B replays generated wire-format queries), a 10,000-name + 100,000-record configuration,
1,000,000 queries with every answer awaited (loss), a backend failing under full load
(watched by a second client), and p50/p99 latency at 20k and 50k QPS offered (after a
warm-up; Knot and gdnsd measured the same way show the measurement's own floor).
Every address is on 127.0.0.0/8; only the failover run probes (loopback backends).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parent.parent
DEBS = {"dnsperf": "dnsperf", "gdnsd": "gdnsd", "knotd": "knot", "pdns_server": "pdns-server"}
ZONE = "bench.test"
BACKENDS = ["127.0.0.10", "127.0.0.11"]


def install() -> None:
    missing = [
        deb
        for cmd, deb in DEBS.items()
        if not shutil.which(cmd) and not Path(f"/usr/sbin/{cmd}").exists()
    ]
    if (
        Path("/usr/sbin/pdns_server").exists()
        and not Path("/usr/lib/x86_64-linux-gnu/pdns/libbindbackend.so").exists()
    ):
        missing.append("pdns-backend-bind")
    if not missing:
        return
    print(f"installing {' '.join(missing)} (services not started)", file=sys.stderr)
    Path("/usr/sbin/policy-rc.d").write_text("#!/bin/sh\nexit 101\n")
    os.chmod("/usr/sbin/policy-rc.d", 0o755)
    try:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing, "pdns-backend-bind"],
                       check=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))  # fmt: skip
    finally:
        Path("/usr/sbin/policy-rc.d").unlink(missing_ok=True)


def free_port() -> int:
    """A port free for UDP and TCP now (a server may still lose it to someone else before
    it binds: serve() then retries on another)."""
    sys.path.insert(0, str(ROOT))
    from dnsd.drill.ports import free_port_pair

    return free_port_pair()


@dataclass(frozen=True)
class Harness:
    """dnsperf's settings: threads, client sockets, queries in flight."""

    threads: int
    clients: int
    inflight: int

    def args(self) -> list[str]:
        return ["-T", str(self.threads), "-c", str(self.clients), "-q", str(self.inflight)]

    def __str__(self) -> str:
        return f"dnsperf -T {self.threads} -c {self.clients} -q {self.inflight} on core 1"


LADDER = [Harness(1, 8, 400), Harness(2, 20, 200), Harness(2, 40, 500), Harness(3, 60, 1000)]
HARNESS = LADDER[0]  # chosen by tune_harness() before anything is measured
CEILING: dict[str, float] = {}  # the responder's QPS with HARNESS
# The share of core 0 every server gets (None: all of it). Below 1, a cgroup's CPU quota
# holds each server, the load generator's own core does not change: the harness then
# drives every server past what that share answers, and the servers, not dnsperf, are
# the limit (on two cores a whole core's server can outrun dnsperf on the other).
SERVER_CPU: float | None = None
CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller (cfs quota)
QUOTA_PERIOD_US = 10_000


def responder(d: Path, port: int) -> list[str]:
    """Not a DNS server: bench/responder.c, the least a responder can do (the ceiling)."""
    binary = d / "responder"
    subprocess.run(
        ["cc", "-O2", "-o", str(binary), str(ROOT / "bench" / "responder.c")], check=True
    )
    return [str(binary), str(port)]


def tune_harness(seconds: int = 5) -> None:
    """Raise dnsperf's threads and queries in flight until the fastest peer (gdnsd) stops
    improving by 3%, measuring the trivial responder alongside: the harness then drives
    every server with the settings that let the fastest one go fastest, and the table says
    how far that harness reaches at all."""
    global HARNESS
    print("tuning the harness (fastest peer: gdnsd; ceiling: bench/responder.c)…", file=sys.stderr)
    best: tuple[float, Harness] | None = None
    rows = []
    for harness in LADDER:

        def drive(port: int, d: Path, h: Harness = harness) -> dict[str, float]:
            return dnsperf(port, query_file(d), seconds, harness=h)

        peer = serve("gdnsd", gdnsd, drive)
        ceiling = serve("responder", responder, drive)
        if peer is None or ceiling is None:
            break
        rows.append((harness, peer["qps"], ceiling["qps"]))
        print(
            f"  {harness}: gdnsd {peer['qps']:.0f} QPS, responder {ceiling['qps']:.0f} QPS",
            file=sys.stderr,
        )
        if best is not None and peer["qps"] < best[0] * 1.03:
            break
        best = (peer["qps"], harness)
    if best is not None:
        HARNESS = best[1]
        # What this harness was seen to count at most: the responder's rate, or the
        # fastest peer's when that was higher (single 5 s runs: the two trade places).
        CEILING["qps"] = max(best[0], next(c for h, _, c in rows if h == HARNESS))
        CEILING["peer"] = best[0]
    print("\nharness: " + "; ".join(f"{h}: gdnsd {p:.0f}, responder {c:.0f}" for h, p, c in rows))
    limit = " (gdnsd within 10% of it: the harness, not gdnsd, is the limit)" if CEILING and CEILING["peer"] > 0.9 * CEILING["qps"] else ""  # fmt: skip
    print(
        f"chosen: {HARNESS}; ceiling (responder) {CEILING.get('qps', float('nan')):.0f} QPS{limit}"
    )


def zone_file(www: str) -> str:
    return f"""$ORIGIN {ZONE}.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 900 1209600 300
@ IN NS ns1
ns1 IN A 127.0.0.1
static IN A 127.0.0.80
{www}
"""


# -- the servers -------------------------------------------------------------------------------
def dnsd_serve(d: Path, port: int, pools: str, ttl: int = 30, monitors: str = "") -> list[str]:
    """Write dnsd's version of the benchmark zone (`pools` is YAML) and its command line."""
    (d / "zones").mkdir()
    (d / "zones" / "bench.yaml").write_text(f"""\
zone: {ZONE}
soa: {{mname: ns1.{ZONE}., rname: hostmaster.{ZONE}.}}
records:
  "@": {{NS: ns1.{ZONE}.}}
  ns1: {{A: 127.0.0.1}}
  static: {{A: 127.0.0.80}}
  www: {{lb: www}}
{monitors}pools:
{pools}
load_balancers:
  www: {{ttl: {ttl}, default_pools: [primary, secondary]}}
""")
    return [sys.executable, "-m", "dnsd", "serve", str(d / "zones"), "--listen", f"127.0.0.1:{port}",
            "--admin", "off", "--rrl-rate", "0", "--state-dir", str(d / "state")]  # fmt: skip


def dnsd(d: Path, port: int) -> list[str]:
    pools = f"""\
  primary: {{backends: [{{name: a, address: {BACKENDS[0]}}}, {{name: b, address: {BACKENDS[1]}}}]}}
  secondary: {{backends: [{{name: c, address: 127.0.0.20}}]}}"""
    return dnsd_serve(d, port, pools)


def pure(build: Callable[[Path, int], list[str]]) -> Callable[[Path, int], list[str]]:
    """The same dnsd with the pure-Python serving loop (--serving-loop pure)."""
    return lambda d, port: [*build(d, port), "--serving-loop", "pure"]


def dnsd_signed(d: Path, port: int) -> list[str]:
    """The same zone signed online (`dnssec: {}`): queried with DO=1 (dnsperf -D)."""
    cmd = dnsd(d, port)
    with open(d / "zones" / "bench.yaml", "a") as handle:
        handle.write("dnssec: {algorithm: 13}\n")
    return cmd


def gdnsd(d: Path, port: int) -> list[str]:
    (d / "zones").mkdir()
    (d / "run").mkdir()
    (d / "state").mkdir()
    (d / "config").write_text(f"""\
options => {{ listen => [ 127.0.0.1:{port} ], run_dir => {d}/run, state_dir => {d}/state, udp_threads => 1, tcp_threads => 1 }}
plugins => {{ metafo => {{ resources => {{ www => {{
  datacenters => [ dc1, dc2 ]
  service_types => up
  dcmap => {{ dc1 => {{ a => {BACKENDS[0]}, b => {BACKENDS[1]} }}, dc2 => {{ c => 127.0.0.20 }} }}
}} }} }} }}
""")
    (d / "zones" / ZONE).write_text(zone_file("www 30 IN DYNA metafo!www"))
    return ["gdnsd", "-c", str(d), "start"]


def knot(d: Path, port: int) -> list[str]:
    (d / f"{ZONE}.zone").write_text(
        zone_file(f"www 30 IN A {BACKENDS[0]}\nwww 30 IN A {BACKENDS[1]}")
    )
    (d / "knot.conf").write_text(f"""\
server:
    listen: 127.0.0.1@{port}
    rundir: {d}
    udp-workers: 1
    tcp-workers: 1
database:
    storage: {d}
zone:
  - domain: {ZONE}
    storage: {d}
    file: {ZONE}.zone
""")
    return ["knotd", "-c", str(d / "knot.conf")]


def python_floor(d: Path, port: int) -> list[str]:
    """Not a DNS server: precomputed answers through dnsd's batched I/O (bench/floor.py)."""
    return [sys.executable, str(ROOT / "bench" / "floor.py"), str(port)]


def pdns(shared: bool) -> Callable[[Path, int], list[str]]:
    def build(d: Path, port: int) -> list[str]:
        lua = "'" + "','".join(BACKENDS) + "'"
        (d / f"{ZONE}.zone").write_text(zone_file(f'www 30 IN LUA A "pickrandom({{{lua}}})"'))
        (d / "named.conf").write_text(
            f'zone "{ZONE}" {{ type master; file "{d}/{ZONE}.zone"; }};\n'
        )
        (d / "pdns.conf").write_text(f"""\
launch=bind
bind-config={d}/named.conf
local-address=127.0.0.1
local-port={port}
daemon=no
guardian=no
socket-dir={d}
disable-syslog=yes
loglevel=3
enable-lua-records={"shared" if shared else "yes"}
receiver-threads=1
distributor-threads=1
""")
        return ["pdns_server", f"--config-dir={d}"]

    return build


# -- measuring --------------------------------------------------------------------------------
def query_file(d: Path, names: list[str] | None = None) -> Path:
    lines = names or (
        [f"www.{ZONE} A"] * 8 + [f"static.{ZONE} A", f"nx{random.randrange(10)}.{ZONE} A"]
    )
    path = d / "queries.txt"
    path.write_text("\n".join(lines * 100) + "\n")
    return path


def dnsperf(
    port: int,
    queries: Path,
    seconds: int,
    extra: tuple[str, ...] = (),
    harness: Harness | None = None,
) -> dict[str, float]:
    out = subprocess.run(
        ["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(queries),
         *(["-l", str(seconds)] if seconds else []), *(harness or HARNESS).args(), *extra],
        capture_output=True, text=True, timeout=(seconds or 120) + 30,
    ).stdout  # fmt: skip

    def number(label: str) -> float:
        match = re.search(rf"{label}:\s+([\d.]+)", out)
        return float(match.group(1)) if match else float("nan")

    return {"qps": number("Queries per second"), "latency_ms": number("Average Latency \\(s\\)") * 1000,
            "lost": number("Queries lost"), "sent": number("Queries sent")}  # fmt: skip


def serve(
    name: str,
    build: Callable[[Path, int], list[str]],
    run: Callable[[int, Path], dict[str, float]],
    warm: Callable[[int, Path], None] | None = None,
) -> dict[str, float] | None:
    """Start the server, `warm` it (not measured), `run` the measurement."""
    for _attempt in range(3):  # a port taken between choosing it and binding: another one
        result = _serve_once(name, build, run, warm)
        if result != "retry":
            return result  # type: ignore[return-value]
    print(f"{name}: no port could be bound in 3 attempts", file=sys.stderr)
    return None


def rate_arguments() -> argparse.Namespace:
    """`--runs`, `--seconds` and `--harness` of a rate benchmark, the harness set, and this
    script moved off the server's core."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--harness", default="2,20,200", help="dnsperf THREADS,CLIENTS,INFLIGHT")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {1})  # this script stays off the server's core
    global HARNESS
    HARNESS = Harness(*(int(x) for x in args.harness.split(",")))
    return args


def warm_query_file(port: int, d: Path) -> None:
    dnsperf(port, query_file(d), 1)  # every name once: the cache holds them


Measure = Callable[[int, Path], dict[str, float]]


def alternate(
    variants: dict[str, tuple[Callable[[Path, int], list[str]], Measure]],
    runs: int,
    warm: Callable[[int, Path], None] | None = None,
    label: str = "dnsd",
) -> dict[str, list[dict[str, float]]]:
    """Each variant (its server, its measurement) served and measured once per round,
    `runs` rounds, so the machine's drift hits every variant alike; exits when one does
    not start."""
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, (build, measure) in variants.items():
            result = serve(f"{label} {name}", build, measure, warm)
            if result is None:
                sys.exit(f"{label} {name} did not start")
            results[name].append(result)
            print(
                f"  {name}: {result['qps']:.0f} QPS, {result['cpu_us']:.2f} µs CPU per answer",
                file=sys.stderr,
            )
    return results


def medians(results: dict[str, list[dict[str, float]]], key: str) -> dict[str, float]:
    return {name: statistics.median(r[key] for r in rs) for name, rs in results.items()}


def _serve_once(
    name: str,
    build: Callable[[Path, int], list[str]],
    run: Callable[[int, Path], dict[str, float]],
    warm: Callable[[int, Path], None] | None,
) -> dict[str, float] | str | None:
    with tempfile.TemporaryDirectory(
        prefix="bench-" + re.sub(r"[^a-z0-9]+", "-", name) + "-"
    ) as tmp:
        d = Path(tmp)
        port = free_port()
        cmd = build(d, port)
        group = _cpu_group(name)
        limited = [] if group is None else ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh"]  # fmt: skip
        proc = subprocess.Popen(
            [*limited, "taskset", "-c", "0", *cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 180  # the 110,000-record config takes a while to load
            while True:
                probe = subprocess.run(["dig", "@127.0.0.1", "-p", str(port), "+short", "+tries=1", "+time=1", f"static.{ZONE}"],
                                       capture_output=True, text=True)  # fmt: skip
                if probe.stdout.strip() == "127.0.0.80":
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()  # before reading stderr to its end
                    err = proc.stderr.read().decode()[-500:] if proc.stderr else ""
                    if "in use" in err.lower():
                        return "retry"
                    print(f"{name}: did not start: {err}", file=sys.stderr)
                    return None
                time.sleep(0.2)
            if warm is not None:
                warm(port, d)
            cpu_before = _cpu_s(proc.pid)
            result = run(port, d)
            result["rss_mib"] = _rss_mib(proc.pid)  # after the run: caches filled
            answered = result.get("sent", float("nan")) - result.get("lost", 0.0)
            result["cpu_us"] = (_cpu_s(proc.pid) - cpu_before) / answered * 1e6
            return result
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if group is not None:
                group.rmdir()


def _cpu_group(name: str) -> Path | None:
    """A cgroup holding a server to SERVER_CPU of a core (None: no limit asked, or the
    responder: it measures the harness's own ceiling)."""
    if SERVER_CPU is None or SERVER_CPU >= 1 or name.startswith("responder"):
        return None
    if not (CPU_CGROUPS / "cpu.cfs_quota_us").exists():
        sys.exit(f"--server-cpu needs cgroup v1's cpu controller at {CPU_CGROUPS}")
    group = CPU_CGROUPS / f"dnsd-bench-{os.getpid()}-{re.sub(r'[^a-z0-9]+', '-', name)}"
    group.mkdir(exist_ok=True)
    (group / "cpu.cfs_period_us").write_text(str(QUOTA_PERIOD_US))
    (group / "cpu.cfs_quota_us").write_text(str(int(QUOTA_PERIOD_US * SERVER_CPU)))
    return group


def _cpu_s(pid: int) -> float:
    """CPU seconds a process (all its threads) has used: user + system. Per answer, it says
    how much of its core a server needs when the load generator, not the server, is the
    limit (every server below the harness ceiling answers the same QPS)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    """Resident memory of a process (taskset execs the server: same pid)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def median_of(
    name: str,
    build: Callable[[Path, int], list[str]],
    runs: int,
    seconds: int,
    names: list[str] | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, float] | None:
    results = []
    for _ in range(runs):
        r = serve(name, build, lambda port, d: dnsperf(port, query_file(d, names), seconds, extra))
        if r is None:
            return None
        results.append(r)
    qps = statistics.median(r["qps"] for r in results)
    best = min(results, key=lambda r: abs(r["qps"] - qps))
    return {**best, "qps": qps, "runs": [round(r["qps"]) for r in results]}  # type: ignore[dict-item]


def p99_at(
    rate: int, build: Callable[[Path, int], list[str]], seconds: int = 6,
    extra: tuple[str, ...] = (),
) -> dict[str, float] | None:  # fmt: skip
    def run(port: int, d: Path) -> dict[str, float]:
        dnsperf(port, query_file(d), 2, ("-Q", str(rate), *extra))  # warm up: caches fill
        out = subprocess.run(
            ["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(query_file(d)),
             "-l", str(seconds), "-Q", str(rate), *HARNESS.args(), "-v", *extra],
            capture_output=True, text=True, timeout=seconds + 30,
        ).stdout  # fmt: skip
        arrived = []
        for line in out.splitlines():
            parts = line.split()
            if line.startswith("> ") and len(parts) == 5 and parts[1] != "T":
                arrived.append(float(parts[4]))  # "> NOERROR name A 0.000479", in arrival order
        # dnsperf opens with a burst (every client's window at once): the first second shows
        # how fast a server drains it; the rest is the sustained rate.
        latencies, steady = sorted(arrived), sorted(arrived[rate:])
        lost = re.search(r"Queries lost:\s+(\d+)", out)
        return {"p50_ms": latencies[len(latencies) // 2] * 1000, "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
                "steady_p99_ms": steady[int(len(steady) * 0.99)] * 1000 if steady else float("nan"),
                "answered": len(arrived), "lost": float(lost.group(1)) if lost else float("nan")}  # fmt: skip

    return serve("p99", build, run)


# -- ECS from many subnets: location-dependent answers ------------------------------------------
GEO_POOLS = {"na": "127.0.0.10", "eu": "127.0.0.11", "asia": "127.0.0.12", "other": "127.0.0.20"}


def ecs_queries(d: Path, subnets: int = 10_000, seed: int = 9) -> Path:
    """dnsperf -B input (2-byte length + message): `www` A, each with the ECS option of
    another random public /24, so each query is located on its own."""
    import struct

    rng = random.Random(seed)
    qname = b"".join(bytes([len(x)]) + x.encode() for x in f"www.{ZONE}".split(".")) + b"\0"
    out = bytearray()
    made = 0
    while made < subnets:
        a = rng.randrange(1, 224)
        b = rng.randrange(256)
        if a in (10, 127) or (a, b >> 4) == (172, 1) or (a, b) in ((192, 168), (169, 254)):
            continue
        ecs = struct.pack("!HBB", 1, 24, 0) + bytes([a, b, rng.randrange(256)])
        opt = (
            b"\0"
            + struct.pack("!HHIH", 41, 1232, 0, 4 + len(ecs))
            + struct.pack("!HH", 8, len(ecs))
            + ecs
        )
        msg = struct.pack("!HHHHHH", 0, 0, 1, 0, 0, 1) + qname + struct.pack("!HH", 1, 1) + opt
        out += struct.pack("!H", len(msg)) + msg
        made += 1
    path = d / "ecs-queries.bin"
    path.write_bytes(bytes(out))
    return path


def dnsd_geo(d: Path, port: int) -> list[str]:
    pools = "\n".join(
        f"  {n}: {{backends: [{{name: {n}1, address: {a}}}]}}" for n, a in GEO_POOLS.items()
    )
    cmd = dnsd_serve(d, port, pools)
    text = (
        (d / "zones" / "bench.yaml")
        .read_text()
        .replace(
            "  www: {ttl: 30, default_pools: [primary, secondary]}",
            "  www: {ttl: 30, steering: geo, default_pools: [other], region_pools: {WNAM: [na], ENAM: [na],"
            " WEU: [eu], EEU: [eu], NEAS: [asia], SEAS: [asia], SAS: [asia]}}",
        )
    )
    (d / "zones" / "bench.yaml").write_text(text)
    return cmd


def gdnsd_geo(d: Path, port: int) -> list[str]:
    from dnsd.geo.database import GeoDatabase

    cmd = gdnsd(d, port)
    dcs = ", ".join(GEO_POOLS)
    dcmap = ", ".join(f"{n} => {a}" for n, a in GEO_POOLS.items())
    (d / "config").write_text(f"""\
options => {{ listen => [ 127.0.0.1:{port} ], run_dir => {d}/run, state_dir => {d}/state, udp_threads => 1, tcp_threads => 1 }}
plugins => {{ geoip => {{
  maps => {{ m => {{ geoip2_db => {GeoDatabase(None).path}, datacenters => [{dcs}],
                    map => {{ NA => [na], EU => [eu], AS => [asia] }} }} }}
  resources => {{ www => {{ map => m, dcmap => {{ {dcmap} }} }} }}
}} }}
""")
    (d / "zones" / ZONE).write_text(zone_file("www 30 IN DYNA geoip!www"))
    return cmd


def ecs_run(
    name: str, build: Callable[[Path, int], list[str]], seconds: int
) -> dict[str, float] | None:
    def warm(port: int, d: Path) -> None:  # each query once first: caches filled
        dnsperf(port, ecs_queries(d), 0, ("-B", "-n", "1"))

    def run(port: int, d: Path) -> dict[str, float]:
        return dnsperf(port, d / "ecs-queries.bin", seconds, ("-B",))

    return serve(name, build, run, warm)


def big_config(d: Path, port: int) -> list[str]:
    (d / "zones").mkdir()
    lines = [f"zone: {ZONE}", f"soa: {{mname: ns1.{ZONE}., rname: h.{ZONE}.}}", "records:", f'  "@": {{NS: ns1.{ZONE}.}}',
             "  ns1: {A: 127.0.0.1}", "  static: {A: 127.0.0.80}"]  # fmt: skip
    lines += [
        f"  s{i}: {{A: 127.{1 + i // 65536}.{i // 256 % 256}.{i % 256}}}" for i in range(100_000)
    ]
    lines += [f"  lb{i}: {{lb: w{i}}}" for i in range(10_000)]
    lines += ["pools:"] + [
        f"  p{i}: {{backends: [{{name: a, address: 127.0.9.{i % 250 + 1}}}]}}"
        for i in range(10_000)
    ]
    lines += ["load_balancers:"] + [
        f"  w{i}: {{ttl: 30, default_pools: [p{i}]}}" for i in range(10_000)
    ]
    (d / "zones" / "big.yaml").write_text("\n".join(lines) + "\n")
    return [sys.executable, "-m", "dnsd", "serve", str(d / "zones"), "--listen", f"127.0.0.1:{port}",
            "--admin", "off", "--rrl-rate", "0", "--state-dir", str(d / "state")]  # fmt: skip


def many_names(seconds: int) -> dict[str, float] | None:
    """QPS asking one load-balanced name against asking all 10,000, each asked once before
    the measured run (dnsperf -n 1 over the file): the steady state is compared, not the
    first answer of each name."""

    def warmed(names: list[str]) -> Callable[[int, Path], dict[str, float]]:
        def run(port: int, d: Path) -> dict[str, float]:
            queries = query_file(d, names)
            dnsperf(port, queries, 0, ("-n", "1"))
            return dnsperf(port, queries, seconds)

        return run

    names = [f"lb{i}.{ZONE} A" for i in range(10_000)]
    random.shuffle(names)
    one = serve("dnsd one LB name", big_config, warmed([f"lb0.{ZONE} A"]))
    many = serve("dnsd 10k LB names", big_config, warmed(names))
    if one is None or many is None:
        return None
    return {"one": one["qps"], "many": many["qps"]}


def failover_under_load(seconds: int = 12) -> dict[str, float] | None:
    """A backend fails during a full-speed dnsperf run; a second client polls every 50 ms
    and measures when dnsd's answer leaves it (bound: interval × threshold + timeout)."""
    import asyncio
    import threading

    from dnslib import DNSRecord

    from dnsd.drill.backend import DemoBackend

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    def call(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(30)

    backends = {
        a: call(DemoBackend(a, host=a, control_port=None).start())
        for a in ("127.0.0.10", "127.0.0.11", "127.0.0.20")
    }

    def build(d: Path, port: int) -> list[str]:
        b = {
            a: f"{{name: n{i}, address: {a}, port: {x.port}}}"
            for i, (a, x) in enumerate(backends.items())
        }
        monitors = (
            "monitors:\n  m: {type: http, path: /healthz, interval: 0.5s, timeout: 0.4s,"
            " unhealthy_threshold: 2, healthy_threshold: 2}\n"
        )
        pools = f"""\
  primary: {{monitor: m, backends: [{b["127.0.0.10"]}, {b["127.0.0.11"]}]}}
  secondary: {{monitor: m, backends: [{b["127.0.0.20"]}]}}"""
        return dnsd_serve(d, port, pools, ttl=2, monitors=monitors)

    def run(port: int, d: Path) -> dict[str, float]:
        perf = subprocess.Popen(
            ["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(query_file(d)),
             "-l", str(seconds), *HARNESS.args()], stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(4)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(1.0)
            for a in ("127.0.0.10", "127.0.0.11"):
                call(backends[a].set_mode("503"))
            failed_at, moved_after, polls, unanswered = time.monotonic(), float("nan"), 0, 0
            while time.monotonic() - failed_at < 5:
                s.sendto(DNSRecord.question(f"www.{ZONE}").pack(), ("127.0.0.1", port))
                polls += 1
                try:
                    reply = DNSRecord.parse(s.recv(4096))
                except TimeoutError:
                    unanswered += 1
                    continue
                if reply.rr and str(reply.rr[0].rdata) == "127.0.0.20":
                    moved_after = time.monotonic() - failed_at
                    break
                time.sleep(0.05)
        out, _ = perf.communicate(timeout=seconds + 30)
        qps = re.search(r"Queries per second:\s+([\d.]+)", out)
        return {"moved_after_s": moved_after, "bound_s": 0.5 * 2 + 0.4, "qps": float(qps.group(1)) if qps else float("nan"),
                "polls": polls, "unanswered": unanswered}  # fmt: skip

    try:
        return serve("dnsd-failover", build, run)
    finally:
        for x in backends.values():
            call(x.stop())
        loop.call_soon_threadsafe(loop.stop)


def loss_run(
    build: Callable[[Path, int], list[str]], passes: int = 1000
) -> dict[str, float] | None:
    """1,000,000 queries (`-n`: dnsperf waits for every answer): how many are lost."""

    def run(port: int, d: Path) -> dict[str, float]:
        return dnsperf(port, query_file(d), 0, ("-n", str(passes)))

    return serve("dnsd-loss", build, run)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--skip-install", action="store_true")
    parser.add_argument("--only", nargs="*", help="run only these servers")
    parser.add_argument("--dnssec", action="store_true",
                        help="only: dnsd unsigned vs signed online (DO=1), and p99 signed")  # fmt: skip
    parser.add_argument("--harness", help="THREADS,CLIENTS,INFLIGHT: skip tuning, use these")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {1})  # this script and its dig probes stay off the server's core
    if not args.skip_install:
        install()
    global HARNESS
    if args.harness:
        HARNESS = Harness(*(int(x) for x in args.harness.split(",")))
        ceiling = serve("responder", responder, lambda port, d: dnsperf(port, query_file(d), args.seconds))  # fmt: skip
        CEILING["qps"] = ceiling["qps"] if ceiling else float("nan")
        print(f"harness: {HARNESS}; ceiling (responder) {CEILING['qps']:.0f} QPS")
    else:
        tune_harness()
    if args.dnssec:
        dnssec_report(args.runs, args.seconds)
        return
    servers: dict[str, Callable[[Path, int], list[str]]] = {
        "dnsd": dnsd, "dnsd pure": pure(dnsd), "gdnsd (metafo)": gdnsd, "knot (static)": knot,
        "pdns LUA": pdns(False), "pdns LUA shared": pdns(True), "python floor": python_floor,
    }  # fmt: skip
    rows = {}
    for name, build in servers.items():
        if args.only and name.split()[0] not in args.only:
            continue
        print(f"measuring {name}…", file=sys.stderr)
        rows[name] = median_of(name, build, args.runs, args.seconds)
    print(f"\ndnsd vs peers, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, server on core 0, {HARNESS}, "
          f"median of {args.runs} × {args.seconds}s; harness ceiling {CEILING.get('qps', float('nan')):.0f} QPS")  # fmt: skip
    print(
        f"{'server':<18} {'QPS':>9} {'avg latency':>12} {'lost':>6}  {'dnsd/peer':>9} {'CPU/answer':>10} {'RSS':>8}  runs"
    )
    ours = rows.get("dnsd")
    for name, r in rows.items():
        if r is None:
            print(f"{name:<18} did not start")
            continue
        ratio = f"{ours['qps'] / r['qps']:.2f}×" if ours else "-"
        print(
            f"{name:<18} {r['qps']:>9.0f} {r['latency_ms']:>10.3f}ms {r['lost']:>6.0f}  {ratio:>9} {r['cpu_us']:>8.2f}µs {r['rss_mib']:>5.0f} MiB  {r['runs']}"
        )
    gdnsd_row = rows.get("gdnsd (metafo)")
    if ours and gdnsd_row and rows.get("dnsd pure"):
        print(f"dnsd ÷ gdnsd: compiled loop {ours['qps'] / gdnsd_row['qps']:.2f}, "
              f"pure-Python loop {rows['dnsd pure']['qps'] / gdnsd_row['qps']:.2f}")  # fmt: skip
    if args.only and "dnsd" not in args.only:
        return
    ecs_rows = (("dnsd", dnsd_geo), ("dnsd pure", pure(dnsd_geo)), ("gdnsd (geoip)", gdnsd_geo))
    for name, build in ecs_rows:
        runs = [ecs_run(name, build, args.seconds) for _ in range(args.runs)]
        done = [r for r in runs if r is not None]
        if done:
            qps = statistics.median(r["qps"] for r in done)
            cpu = statistics.median(r["cpu_us"] for r in done)
            print(f"{name + ', ECS from 10,000 /24s (geo)':<34} {qps:>9.0f} QPS, {cpu:.2f} µs CPU per answer, lost {sum(r['lost'] for r in done):.0f}, runs {[round(r['qps']) for r in done]}")  # fmt: skip
    # 10,000 distinct names: 5,000 of the load-balanced ones, 5,000 of the static ones.
    names = [f"lb{i}.{ZONE} A" for i in random.sample(range(10_000), 5000)]
    names += [f"s{i}.{ZONE} A" for i in random.sample(range(100_000), 5000)]
    random.shuffle(names)
    big = median_of("dnsd 10k LB + 100k records", big_config, 1, args.seconds, names)
    if big:
        print(
            f"{'dnsd, 10k LB names + 100k records':<34} {big['qps']:>9.0f} QPS {big['latency_ms']:>8.3f}ms avg, lost {big['lost']:.0f}, RSS {big['rss_mib']:.0f} MiB"
        )
    many = many_names(args.seconds)
    if many:
        print(f"dnsd, 10k LB config: one name {many['one']:.0f} QPS, 10,000 names {many['many']:.0f} QPS = {many['many'] / many['one']:.2f}x (target >= 0.8)")  # fmt: skip
    loss = loss_run(dnsd)
    if loss:
        print(
            f"dnsd, 1,000,000 queries (-n, every answer awaited): {loss['lost']:.0f} lost, {loss['qps']:.0f} QPS"
        )
    moved = failover_under_load()
    if moved:
        print(
            f"dnsd under full load ({moved['qps']:.0f} QPS): primary failed, answers moved after {moved['moved_after_s']:.2f}s "
            f"(bound {moved['bound_s']:.1f}s), second client: {moved['polls']:.0f} polls, {moved['unanswered']:.0f} unanswered"
        )
    for rate in (20_000, 50_000):
        for name, build in (("dnsd", dnsd), ("knot (static)", knot), ("gdnsd (metafo)", gdnsd),
                            ("python floor", python_floor)):  # fmt: skip
            p99 = p99_at(rate, build)
            if p99:
                print(f"{name} at {rate // 1000}k QPS offered: p50 {p99['p50_ms']:.3f} ms, p99 {p99['p99_ms']:.3f} ms, "
                      f"p99 after the first second {p99['steady_p99_ms']:.3f} ms, answered {p99['answered']:.0f}, lost {p99['lost']:.0f}")  # fmt: skip


def dnssec_report(runs: int, seconds: int) -> None:
    """Signed answers (DO=1, every reply signed online, signatures cached) beside unsigned."""
    plain = median_of("dnsd", dnsd, runs, seconds)
    signed = median_of("dnsd signed", dnsd_signed, runs, seconds, extra=("-D",))
    print(
        f"\ndnsd signed online vs unsigned, {time.strftime('%Y-%m-%d')}, median of {runs} × {seconds}s"
    )
    for name, r in (("dnsd unsigned", plain), ("dnsd signed, DO=1", signed)):
        if r is not None:
            print(f"{name:<20} {r['qps']:>9.0f} QPS {r['latency_ms']:>8.3f}ms avg, lost {r['lost']:.0f}, RSS {r['rss_mib']:.0f} MiB, runs {r['runs']}")  # fmt: skip
    if plain and signed:
        print(f"signed ÷ unsigned: {signed['qps'] / plain['qps']:.2f}")
    for rate in (20_000, 50_000):
        p99 = p99_at(rate, dnsd_signed, extra=("-D",))
        if p99:
            print(f"dnsd signed at {rate // 1000}k QPS offered: p50 {p99['p50_ms']:.3f} ms, p99 {p99['p99_ms']:.3f} ms, "
                  f"p99 after the first second {p99['steady_p99_ms']:.3f} ms, answered {p99['answered']:.0f}, lost {p99['lost']:.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
