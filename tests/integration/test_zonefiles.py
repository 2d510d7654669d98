"""Zone files: a `file:` zone is served as the file says, `dnsd check` points at
the zone file's line, `$INCLUDE` stays inside the config directory, TSIG secrets never
appear in errors, and `dnsd import` then `dnsd export` round-trips."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from pathlib import Path

import dns.zone
import pytest

from tests.processes import DnsdProcess

ROOT = Path(__file__).parent.parent.parent
DIFF = ROOT / "tests" / "data" / "differential"


def dnsd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dnsd", *args], capture_output=True, text=True)


def record_set(text: str, origin: str) -> set[str]:
    zone = dns.zone.from_text(text, origin=origin, relativize=False, check_origin=False)
    return {f"{n} {t} {r.rdtype.name} {r.to_text()}" for n, t, r in zone.iterate_rdatas()}


def dig(port: int, name: str, qtype: str) -> list[str]:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), "+short", name, qtype],
        capture_output=True, text=True, timeout=10,
    ).stdout  # fmt: skip
    return sorted(out.split("\n")[:-1])


def test_a_file_zone_is_served_as_the_file_says() -> None:
    with DnsdProcess(DIFF) as server:
        assert dig(server.port, "www.diff.example", "A") == ["192.0.2.80", "192.0.2.81"]
        assert dig(server.port, "x.wild.diff.example", "TXT") == ['"wildcard"']
        assert dig(server.port, "chain1.diff.example", "A") == [
            "192.0.2.33", "chain2.diff.example.", "chain3.diff.example.",
        ]  # fmt: skip
        assert dig(server.port, "diff.example", "SOA")[0].split()[2] == "2026120101"


def test_import_then_export_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "zones"
    done = dnsd("import", str(DIFF / "diff.example.zone"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "diff.example.yaml").exists()
    exported = dnsd("export", "diff.example", "--dir", str(out))
    assert exported.returncode == 0, exported.stderr
    original = record_set((DIFF / "diff.example.zone").read_text(), "diff.example.")
    assert record_set(exported.stdout, "diff.example.") == original
    again = dnsd("import", str(DIFF / "diff.example.zone"), "--out", str(out))
    assert again.returncode == 1 and "not overwritten" in again.stderr


def test_export_marks_load_balanced_names_and_import_keeps_their_records(tmp_path: Path) -> None:
    exported = dnsd("export", "example.test", "--dir", str(ROOT / "zones"))
    assert exported.returncode == 0, exported.stderr
    assert "; load-balanced (lb: web)" in exported.stdout
    (tmp_path / "example.test.zone").write_text(exported.stdout)
    assert (
        dnsd("import", str(tmp_path / "example.test.zone"), "--out", str(tmp_path / "z")).returncode
        == 0
    )
    again = dnsd("export", "example.test", "--dir", str(tmp_path / "z"))
    assert record_set(again.stdout, "example.test.") == record_set(exported.stdout, "example.test.")


@pytest.mark.parametrize(
    ("zone_text", "include", "expected"),
    [
        ("$TTL 60\n@ IN SOA ns h 1 2 3 4 5\nwww IN A 999.1.1.1\n", None, "z.zone:3:"),
        ("@ 60 IN SOA ns h 1 2 3 4 5\n$INCLUDE part.inc\n", "ok IN A 192.0.2.1\nbad IN BOGUS x\n",
         "part.inc:2: unknown rdatatype 'BOGUS'"),
        ("@ 60 IN SOA ns h 1 2 3 4 5\n$INCLUDE /etc/passwd\n", None,
         "/etc/passwd: outside the config directory"),
        ("@ 60 IN SOA ns h 1 2 3 4 5\nh 60 IN RRSIG A 13 3 60 20300101000000 20200101000000 1 z.example. AAAA\n",
         None, "z.zone:2: h.z.example. RRSIG: record type RRSIG cannot be configured: dnsd writes"),
        ("www 60 IN A 192.0.2.1\n", None, "no SOA record at z.example."),
    ],
)  # fmt: skip
def test_check_points_at_the_zone_file_line(
    tmp_path: Path, zone_text: str, include: str | None, expected: str
) -> None:
    (tmp_path / "z.yaml").write_text("zone: z.example\nfile: z.zone\n")
    (tmp_path / "z.zone").write_text(zone_text)
    if include is not None:
        (tmp_path / "part.inc").write_text(include)
    done = dnsd("check", str(tmp_path))
    assert done.returncode == 1
    assert expected in done.stderr, done.stderr


def test_tsig_secret_errors_never_show_the_secret(tmp_path: Path) -> None:
    secret = "enE5eGs="  # base64 of "zq9xk", 5 bytes: too short
    (tmp_path / "k.b64").write_text(secret)
    shutil.copy(ROOT / "zones" / "example.test.yaml", tmp_path / "example.test.yaml")
    (tmp_path / "keys.yaml").write_text(
        "tsig_keys:\n  a: {secret_file: k.b64}\n  b: {secret_env: DNSD_TEST_NO_SUCH_VAR}\n"
        "  c: {secret_file: ../../etc/passwd}\n  d: {secret_file: k.b64, algorithm: hmac-md5}\n"
    )
    done = dnsd("check", str(tmp_path))
    assert done.returncode == 1
    assert "shorter than 16 bytes" in done.stderr
    assert "DNSD_TEST_NO_SUCH_VAR is not set" in done.stderr
    assert "outside the config directory" in done.stderr
    assert "'hmac-md5' is not one of" in done.stderr
    assert secret not in done.stderr and base64.b64decode(secret).decode() not in done.stderr
