"""A full state disk: the state directory is a real 1 MiB tmpfs, filled to the last byte
while a real `dnsd serve` runs. A config API write, a reload and an override then each get
503 and change nothing (the config file is unchanged byte for byte, DNS answers are the
old ones, the generation does not move) — never applied and answered 500 without an audit
entry. Once space is freed the same three writes are applied, answered 2xx and audited,
and the server has served throughout."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dnsd.admin.audit import AuditLog, AuditUnavailable, entry_size
from tests.admin_client import http
from tests.processes import DnsdProcess

TOKEN = "full-disk-test-token"
US_EAST = {"192.0.2.10", "192.0.2.11", "2001:db8::10"}
EU_WEST = {"198.51.100.10", "198.51.100.11"}


@contextlib.contextmanager
def small_tmpfs(size: str = "1m") -> Iterator[Path]:
    """A real tmpfs of `size` (the tests run as root, as the chattr test does)."""
    mountpoint = Path(tempfile.mkdtemp(prefix="dnsd-tmpfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                    str(mountpoint)], check=True)  # fmt: skip
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=True)
        mountpoint.rmdir()


def fill(directory: Path) -> Path:
    """Write a file until the file system has no byte left; return it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        block = b"\0" * 4096
        while True:
            try:
                os.write(fd, block)
            except OSError:
                break
        while True:  # the last partial page
            try:
                if os.write(fd, b"\0") == 0:
                    break
            except OSError:
                break
    finally:
        os.close(fd)
    stats = os.statvfs(directory)
    assert stats.f_bavail == 0, stats
    return filler


def dig(port: int, name: str) -> list[str]:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), name, "A", "+short", "+tries=1", "+time=2"],
        capture_output=True, text=True, timeout=10, check=True,
    )  # fmt: skip
    return out.stdout.split()


def www(port: int) -> set[str]:
    return {a for _ in range(6) for a in dig(port, "www.example.test")}


def generation(port: int) -> int:
    return int(http(port, "GET", "/readyz")[1]["generation"])


def test_a_full_state_disk_refuses_writes_with_503_and_applies_them_once_freed(
    config_copy: Path,
) -> None:
    zone_file = config_copy / "example.test.yaml"
    with contextlib.ExitStack() as stack:
        state = stack.enter_context(small_tmpfs())
        dnsd = stack.enter_context(DnsdProcess(config_copy, "--state-dir", str(state),
                                               env={"DNSD_ADMIN_TOKEN": TOKEN}))  # fmt: skip
        port, admin = dnsd.port, dnsd.admin_port
        assert www(port) <= US_EAST
        first = generation(admin)
        filler = fill(state)
        text = zone_file.read_bytes()

        # A config API write: refused, nothing written, nothing served.
        record = "/api/v1/config/zones/example.test/records/gen"
        status, body = http(admin, "PUT", record, {"A": ["203.0.113.9"]}, token=TOKEN)
        assert status == 503, (status, body)
        assert "audit" in body["error"] and "nothing changed" in body["error"], body
        assert zone_file.read_bytes() == text
        assert dig(port, "gen.example.test") == []
        assert generation(admin) == first

        # A reload of a file changed by hand: refused, the old snapshot keeps serving.
        edited = text.replace(b"short: {A: 192.0.2.44", b"short: {A: 192.0.2.45")
        assert edited != text
        zone_file.write_bytes(edited)
        status, body = http(admin, "POST", "/api/v1/reload", token=TOKEN)
        assert status == 503, (status, body)
        assert "old config keeps serving" in body["error"], body
        assert dig(port, "short.example.test") == ["192.0.2.44"]
        assert generation(admin) == first

        # An override: refused (the documented 503), answers unchanged.
        pool = "/api/v1/overrides/pools/us-east"
        status, body = http(admin, "PUT", pool, {"state": "down"}, token=TOKEN)
        assert status == 503, (status, body)
        assert "not applied" in body["error"], body
        assert www(port) <= US_EAST
        assert http(admin, "GET", "/api/v1/overrides", token=TOKEN)[1]["overrides"] == []

        # The refusals could not be written to the trail: the log has them instead.
        assert sum("audit entry not written" in line for line in dnsd.lines) >= 3, dnsd.output

        # Space again: the same writes are applied, answered 2xx and audited.
        filler.unlink()
        assert http(admin, "POST", "/api/v1/reload", token=TOKEN)[0] == 200
        assert dig(port, "short.example.test") == ["192.0.2.45"]
        status, body = http(admin, "PUT", record, {"A": ["203.0.113.9"]}, token=TOKEN)
        assert status == 201, (status, body)
        assert dig(port, "gen.example.test") == ["203.0.113.9"]
        assert http(admin, "PUT", pool, {"state": "down"}, token=TOKEN)[0] == 200
        assert www(port) <= EU_WEST
        entries = http(admin, "GET", "/api/v1/audit", token=TOKEN)[1]["entries"]
        assert [(e["method"], e["route"], e["status"]) for e in entries][-3:] == [
            ("POST", "/api/v1/reload", 200),
            ("PUT", record, 201),
            ("PUT", pool, 200),
        ]
        assert generation(admin) == first + 2
        assert http(admin, "GET", "/healthz")[0] == 200


def test_reserved_room_survives_the_disk_filling_up_after_it(caplog: Any) -> None:
    """The reservation is real: after it, another file takes every free byte, and the
    reserved entry is still written whole; an entry without a reservation is not written
    (it would take the reserved room) and goes to the log instead."""
    with small_tmpfs() as state:
        trail = AuditLog(state)
        big = {"after": "x" * 50_000}
        assert entry_size(big) < 16 * 4096
        reserved = trail.reserve(16 * 4096)  # whole pages: nothing to spare beyond it
        fill(state)
        with caplog.at_level(logging.ERROR, logger="dnsd.admin"):
            assert not trail.append_or_log({"time": "t0", "status": 403, "error": "refused"})
        assert "audit entry not written" in caplog.text and '"status": 403' in caplog.text
        trail.append({"time": "t1", "status": 200, **big}, reserved)
        assert [e["time"] for e in trail.since(None)] == ["t1"]
        with pytest.raises(AuditUnavailable):
            trail.reserve(entry_size(big))
