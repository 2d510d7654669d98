"""Big configurations: load time against libyaml alone, serving memory, incremental reload.

    python3 bench/bigconfig.py [--lbs 10000] [--records 100000] [--files 20]

Writes one directory: a zone file with the static records and the load-balanced names, and
FILES-1 files sharing 2 pools per load balancer and the load balancers. Prints:
* `yaml.load(..., CSafeLoader)` of every file alone (the floor a YAML loader can reach);
* `dnsd check DIR` (a fresh process: load, validate, cross-check) and the ratio to it;
* load + compile of a snapshot, and the RSS of `dnsd serve DIR` once it answers;
* a reload after a one-line change in one pools file, against a full load.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))
ZONE = "big.test"


def write_config(d: Path, lbs: int, records: int, files: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    lines = [f"zone: {ZONE}", f"soa: {{mname: ns1.{ZONE}., rname: h.{ZONE}.}}", "records:",
             f'  "@": {{NS: ns1.{ZONE}.}}', "  ns1: {A: 127.0.0.1}"]  # fmt: skip
    lines += [f"  s{i}: {{A: 10.{i // 65536}.{i // 256 % 256}.{i % 256}}}" for i in range(records)]
    lines += [f"  lb{i}: {{lb: w{i}}}" for i in range(lbs)]
    (d / "00-zone.yaml").write_text("\n".join(lines) + "\n")
    per_file = -(-lbs // (files - 1))
    for f in range(files - 1):
        chunk = range(f * per_file, min(lbs, (f + 1) * per_file))
        text = ["pools:"]
        for i in chunk:
            text.append(f"  p{i}a: {{region: ENAM, backends: [{{name: a, address: 10.200.{i // 250 % 250}.{i % 250 + 1}}}]}}")  # fmt: skip
            text.append(f"  p{i}b: {{region: WEU, backends: [{{name: b, address: 10.201.{i // 250 % 250}.{i % 250 + 1}}}]}}")  # fmt: skip
        text.append("load_balancers:")
        text += [f"  w{i}: {{ttl: 30, steering: geo, default_pools: [p{i}a, p{i}b], region_pools: {{WEU: [p{i}b]}}}}" for i in chunk]  # fmt: skip
        (d / f"{f + 1:02d}-pools.yaml").write_text("\n".join(text) + "\n")


def timed(fn, *args):  # type: ignore[no-untyped-def]
    """Seconds fn(*args) took, and its result."""
    started = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - started, result


def libyaml_floor(d: Path) -> tuple[float, float]:
    """Seconds and CPU seconds of `yaml.load(CSafeLoader)` of every file."""
    started, cpu = time.perf_counter(), time.process_time()
    for path in sorted(d.glob("*.yaml")):
        yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    return time.perf_counter() - started, time.process_time() - cpu


def check_process(d: Path) -> tuple[float, float, int]:
    """`dnsd check DIR` in a fresh process: seconds, CPU seconds (user + system: on a
    loaded machine the fairer comparison) and peak RSS (MiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dnsd", "check", str(d)], capture_output=True, text=True)  # fmt: skip
    took = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return took, cpu, after.ru_maxrss // 1024


def serving_rss(d: Path) -> int:
    """RSS (MiB) of `dnsd serve DIR` once it listens."""
    from dnsd.drill.process import DnsdProcess

    # A loaded machine takes well over the default 15 s to load and compile it.
    with DnsdProcess(d, "--admin", "off", "--rrl-rate", "0", start_timeout_s=600) as proc:
        assert proc.proc is not None
        status = Path(f"/proc/{proc.proc.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) // 1024  # type: ignore[union-attr]


def incremental(d: Path) -> tuple[float, float]:
    """A full load, then a reload after one line of one pools file changed (seconds each)."""
    from dnsd.config.loader import ParseCache
    from dnsd.loading import load_snapshot

    cache = ParseCache()
    full, snap = timed(lambda: load_snapshot(d, 1, previous=None, cache=cache))
    path = d / "05-pools.yaml"
    text = path.read_text()
    path.write_text(text.replace("region: ENAM,", "region: WNAM,", 1))
    try:
        again, new = timed(lambda: load_snapshot(d, 2, previous=snap, cache=cache))
    finally:
        path.write_text(text)
    assert cache.parsed == 1, cache.parsed
    changed = [p for p in new.config.pools.values() if p.region == "WNAM"]
    assert len(changed) == 1, "the change is in the new snapshot"
    return full, again


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lbs", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=20)
    args = parser.parse_args()
    d = Path(tempfile.mkdtemp(prefix="dnsd-big-")) / "zones"
    try:
        write_config(d, args.lbs, args.records, args.files)
        size = sum(p.stat().st_size for p in d.glob("*.yaml")) / 1e6
        print(f"config: {args.lbs} LB names, {2 * args.lbs} pools, {args.records} static records, {args.files} files, {size:.1f} MB")  # fmt: skip
        floors = sorted(libyaml_floor(d) for _ in range(3))
        floor, floor_cpu = floors[1][0], sorted(f[1] for f in floors)[1]  # medians
        print(f"yaml.load(CSafeLoader) of every file: {floor:.2f} s, {floor_cpu:.2f} s CPU")
        checks = [check_process(d) for _ in range(3)]
        check, cpu = sorted(c[0] for c in checks)[1], sorted(c[1] for c in checks)[1]
        peak = max(c[2] for c in checks)
        print(f"dnsd check: {check:.2f} s = {check / floor:.2f}x the libyaml floor, {cpu:.2f} s CPU = {cpu / floor_cpu:.2f}x (target <= 1x, medians of 3); peak RSS of the check processes {peak} MiB")  # fmt: skip
        rss = serving_rss(d)
        print(f"dnsd serve RSS once listening: {rss} MiB (target <= 200)")
        full, again = incremental(d)
        print(f"load_snapshot: full {full:.2f} s; after a one-line change in one of {args.files} files {again:.2f} s = {again / full:.0%} (target <= 10%)")  # fmt: skip
    finally:
        shutil.rmtree(d.parent, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
