"""`--reuse-port` handover with fixed ports: a new `dnsd serve` starts while the old one
runs (DNS and the admin port both shared), the old one stops, and dig gets an answer to
every query throughout; the admin API answers from the new process after the old is gone."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from dnsd.drill.ports import free_port_pair
from tests.admin_client import http
from tests.processes import DnsdProcess


class DigLoop(threading.Thread):
    """dig, one query after another, until stopped: what each one got."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.answers: list[str] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            done = subprocess.run(
                ["dig", "@127.0.0.1", "-p", str(self.port), "mail.example.test", "A",
                 "+short", "+tries=2", "+timeout=1"],
                capture_output=True, text=True, timeout=10,
            )  # fmt: skip
            self.answers.append(done.stdout.strip())
            time.sleep(0.01)


def test_a_new_server_takes_over_dns_and_the_fixed_admin_port(
    config_copy: Path, tmp_path: Path
) -> None:
    dns, admin = free_port_pair(), free_port_pair()
    common = ("--admin", f"127.0.0.1:{admin}", "--reuse-port", "--state-dir", str(tmp_path))
    old = DnsdProcess(config_copy, *common, listen=f"127.0.0.1:{dns}").__enter__()
    digs = DigLoop(dns)
    try:
        digs.start()
        time.sleep(0.5)
        with DnsdProcess(config_copy, *common, listen=f"127.0.0.1:{dns}") as new:
            assert new.admin_port == admin and new.port == dns
            time.sleep(0.5)  # both answer for a while
            before = len(digs.answers)
            assert old.stop() == 0
            time.sleep(1.0)  # only the new one answers now
            assert len(digs.answers) > before
            status, body = http(admin, "GET", "/healthz")
            assert status == 200, body
            assert new.proc is not None and new.proc.poll() is None
            digs.stopped.set()
            digs.join(timeout=10)
    finally:
        digs.stopped.set()
        old.stop()
    assert len(digs.answers) > 20
    missed = [i for i, answer in enumerate(digs.answers) if answer != "192.0.2.25"]
    assert not missed, f"{len(missed)} of {len(digs.answers)} queries unanswered"
    print(f"handover: {len(digs.answers)} dig queries, every one answered")
