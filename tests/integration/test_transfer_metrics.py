"""Transfers and NOTIFY are never silent on /metrics: a real `dnsd serve` answers `dig AXFR`
and `kdig IXFR` (full, incremental, current, refused) and counts each by zone, type and
result; a NOTIFY to a secondary that never answers (a real UDP socket) is logged within
seconds and its superseded round counted per secondary."""

from __future__ import annotations

import base64
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.admin_client import http
from tests.processes import DnsdProcess
from tests.waiting import until

ZONE = "x.example"
LABELS = {
    "dnsd_transfers_total": ("zone", "type", "result"),
    "dnsd_transfer_bytes_total": ("zone", "type"),
    "dnsd_notify_total": ("zone", "secondary", "result"),
}


def dig(port: int, *args: str) -> str:
    argv = ["dig", "@127.0.0.1", "-p", str(port), "+time=2", "+tries=1", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout


def kdig(port: int, *args: str) -> str:
    argv = ["kdig", "@127.0.0.1", "-p", str(port), "+time=2", "+retry=0", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    return done.stdout + done.stderr


def serial(port: int) -> int:
    return int(dig(port, "+short", ZONE, "SOA").split()[2])


def samples(text: str, name: str) -> dict[tuple[str, ...], float]:
    """{label values, in the order of `LABELS[name]`: value} of one metric in an exposition."""
    out = {}
    for labels, value in re.findall(rf"^{name}\{{(.*)\}} (\S+)$", text, flags=re.M):
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out[tuple(pairs[label] for label in LABELS[name])] = float(value)
    return out


def write_zone(config: Path, secondary: int, extra: str = "") -> None:
    (config / "x.yaml").write_text(
        "tsig_keys:\n  xfr-key: {secret_file: xfr.b64}\n"
        f"zone: {ZONE}\nsoa: {{mname: ns.{ZONE}., rname: h.{ZONE}., serial: 10}}\n"
        f'records:\n  "@": {{NS: ns.{ZONE}.}}\n  ns: {{A: 192.0.2.1}}\n{extra}'
        f'transfer: {{allow: [127.0.0.1/32], keys: [xfr-key]}}\nnotify: ["127.0.0.1:{secondary}"]\n'
    )


def test_transfers_and_notify_outcomes_are_counted(tmp_path: Path) -> None:
    secret = base64.b64encode(os.urandom(32)).decode()
    key = f"hmac-sha256:xfr-key:{secret}"
    config = tmp_path / "zones"
    config.mkdir()
    (config / "xfr.b64").write_text(secret + "\n")
    dead = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # takes NOTIFY, never answers
    dead.bind(("127.0.0.1", 0))
    port_of_dead = dead.getsockname()[1]
    write_zone(config, port_of_dead)
    try:
        with DnsdProcess(config) as dnsd:
            port = dnsd.port
            first = serial(port)
            axfr = dig(port, "AXFR", ZONE, "-y", key)
            assert axfr.count("\tSOA\t") == 2, axfr  # SOA, records, SOA
            assert "NOTAUTH" in kdig(port, "AXFR", ZONE)  # no TSIG
            assert "NOTAUTH" in kdig(port, "AXFR", "nowhere.example", "-y", key)
            assert "\tSOA\t" in kdig(port, f"IXFR={first}", ZONE, "-y", key)  # up to date
            assert "\tSOA\t" in kdig(port, "IXFR=1", ZONE, "-y", key)  # not journalled: whole

            # A change: the secondary is told (and never answers); IXFR sends the difference.
            write_zone(config, port_of_dead, "  fresh: {A: 192.0.2.7}\n")
            dnsd.signal(signal.SIGHUP)
            until(lambda: serial(port) != first, 10.0, "the new serial served")
            changed_at = time.monotonic()
            diff = kdig(port, f"IXFR={first}", ZONE, "-y", key)
            assert "fresh.x.example." in diff and "ns.x.example.\t" not in diff.split("fresh")[0]
            dnsd.wait_for_log(f"port {port_of_dead}: no answer within 1 s", timeout=5)
            assert time.monotonic() - changed_at < 3.0
            # Another change supersedes the round still waiting for the dead secondary.
            write_zone(config, port_of_dead, "  fresh: {A: 192.0.2.8}\n")
            dnsd.signal(signal.SIGHUP)
            dnsd.wait_for_log("superseded by serial", timeout=5)
            status, text = http(dnsd.admin_port, "GET", "/metrics")
    finally:
        dead.close()
    assert status == 200
    transfers = samples(text, "dnsd_transfers_total")
    zone = f"{ZONE}."
    assert transfers == {
        (zone, "AXFR", "full"): 1.0,
        (zone, "AXFR", "notauth"): 1.0,
        ("", "AXFR", "notauth"): 1.0,  # not a zone here: no series of its own
        (zone, "IXFR", "current"): 1.0,
        (zone, "IXFR", "full"): 1.0,
        (zone, "IXFR", "incremental"): 1.0,
    }, transfers
    sent = samples(text, "dnsd_transfer_bytes_total")
    assert set(sent) == {(zone, "AXFR"), (zone, "IXFR")} and min(sent.values()) > 100
    notify = samples(text, "dnsd_notify_total")
    assert notify.get((zone, f"127.0.0.1:{port_of_dead}", "superseded")), notify
