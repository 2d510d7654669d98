"""Big zone files: loading is linear, `$GENERATE` and `$INCLUDE` are
bounded with an error naming the file and line, and a server stops promptly on SIGTERM
even in the middle of a long reload. (bench/zonefile_load.py measures the full-size case.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from dnsd.config.loader import load_config
from dnsd.config.zonefile import MAX_GENERATE, MAX_INCLUDED_FILES
from tests.processes import DnsdProcess

ORIGIN = "big.test."


def write_zone(directory: Path, records: int, extra: str = "") -> None:
    lines = [f"$ORIGIN {ORIGIN}", "$TTL 300", "@ IN SOA ns1 hostmaster 1 3600 600 86400 300",
             "@ IN NS ns1", "ns1 IN A 192.0.2.1", extra]  # fmt: skip
    for i in range(records):
        if i % 3 == 0:
            lines.append(f"h{i} IN A 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}")
        elif i % 3 == 1:
            lines.append(f'h{i} IN TXT "record {i}"')
        else:
            lines.append(f"h{i} IN MX 10 mail{i % 7}")
    (directory / "big.yaml").write_text(f"zone: {ORIGIN}\nfile: big.zone\n")
    tmp = directory / ".big.zone.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(directory / "big.zone")


def load_seconds(directory: Path) -> float:
    best = float("inf")
    for _ in range(2):  # the better of two: the machine is shared
        started = time.perf_counter()
        load_config(directory)
        best = min(best, time.perf_counter() - started)
    return best


def test_loading_grows_linearly_with_the_records(tmp_path: Path) -> None:
    """Was quadratic (2.9 s for 2,000 records, 37.9 s for 8,000): 4x the records must cost
    well under 16x the time; the bound (8x) leaves room for a noisy machine."""
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir()
    large.mkdir()
    write_zone(small, 1_500)
    write_zone(large, 6_000)
    config, _ = load_config(large)
    assert sum(len(s.rdatas) for s in config.zones[0].rrsets) >= 6_000
    t_small, t_large = load_seconds(small), load_seconds(large)
    assert t_large < 8 * t_small, (t_small, t_large)


def check(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dnsd", "check", str(directory)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_generate_over_the_limit_is_an_error_at_its_line(tmp_path: Path) -> None:
    write_zone(tmp_path, 10, extra=f"$GENERATE 1-{MAX_GENERATE + 1} g$ A 10.9.0.1")
    started = time.monotonic()
    done = check(tmp_path)
    assert time.monotonic() - started < 20  # refused before any record is made
    assert done.returncode == 1
    zone = tmp_path / "big.zone"
    assert f"{zone}:6:" in done.stderr, done.stderr
    assert f"makes {MAX_GENERATE + 1} records: at most {MAX_GENERATE}" in done.stderr
    write_zone(tmp_path, 10, extra=f"$GENERATE 1-{MAX_GENERATE} g$ A 10.9.0.1")
    assert "$GENERATE" not in check(tmp_path).stderr  # the limit itself is allowed


def test_includes_past_the_limit_are_an_error_at_their_line(tmp_path: Path) -> None:
    (tmp_path / "part.inc").write_text("; nothing\n")
    includes = "\n".join(["$INCLUDE part.inc"] * (MAX_INCLUDED_FILES + 1))
    write_zone(tmp_path, 10, extra=includes)
    done = check(tmp_path)
    assert done.returncode == 1
    line = 6 + MAX_INCLUDED_FILES  # the first $INCLUDE is line 6
    assert f"{tmp_path / 'big.zone'}:{line}: " in done.stderr, done.stderr
    assert f"more than {MAX_INCLUDED_FILES} $INCLUDE lines" in done.stderr
    (tmp_path / "self.inc").write_text("$INCLUDE self.inc\n")
    write_zone(tmp_path, 10, extra="$INCLUDE self.inc")
    done = check(tmp_path)
    assert done.returncode == 1 and "$INCLUDE nested more than 8 deep" in done.stderr
    assert f"{tmp_path / 'self.inc'}:1: " in done.stderr, done.stderr


def test_sigterm_in_the_middle_of_a_long_reload_stops_within_a_second(tmp_path: Path) -> None:
    write_zone(tmp_path, 10)
    with DnsdProcess(tmp_path, "--state-dir", str(tmp_path / "state")) as dnsd:
        write_zone(tmp_path, 60_000)  # tens of seconds to load here
        dnsd.signal(signal.SIGHUP)
        time.sleep(1.5)  # well into the reload
        assert not any(": reloaded " in line for line in dnsd.lines), "the reload was too quick"
        assert dnsd.proc is not None
        started = time.monotonic()
        dnsd.signal(signal.SIGTERM)
        code = dnsd.proc.wait(timeout=30)
        took = time.monotonic() - started
        assert code == 0, dnsd.output
        assert took < 1.5, f"stopped {took:.2f} s after SIGTERM"  # 1 s, with slack
        assert not any(": reloaded " in line for line in dnsd.lines)
