"""A serving loop that fails is never silent: the error goes through the logger
once, /readyz is 503 and systemd's STATUS names the listener until the loop is back, answers
resume, and dnsd_serving_loop_restarts_total moves. Faults come from the test-only hook
(--test-fault-dir: a file named after the loop makes it raise at each batch while it exists);
a worker's fault is real (SIGKILL)."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest
from dnslib import DNSRecord

from tests.admin_client import http
from tests.conftest import DATA
from tests.dnsclient import tcp_raw, udp_raw
from tests.integration.test_systemd import read_all
from tests.processes import DnsdProcess
from tests.waiting import until

NAME = "www.example.test"


def answered(port: int, tcp: bool = False) -> bool:
    wire = DNSRecord.question(NAME).pack()
    try:
        raw = tcp_raw(port, wire, timeout=0.5) if tcp else udp_raw(port, wire, timeout=0.3)
    except (ConnectionError, OSError):
        return False
    return raw is not None and DNSRecord.parse(raw).header.rcode == 0


def ready(dnsd: DnsdProcess) -> int:
    return http(dnsd.admin_port, "GET", "/readyz")[0]


def metric(dnsd: DnsdProcess, name: str, loop: str) -> float:
    _, text = http(dnsd.admin_port, "GET", "/metrics")
    line = next(x for x in text.splitlines() if x.startswith(f'{name}{{loop="{loop}"}}'))
    return float(line.split()[-1])


@pytest.mark.parametrize("loop", ["compiled", "pure"])
def test_a_failing_udp_loop_is_logged_counted_not_ready_and_restarted(tmp_path: Path, loop) -> None:
    faults = tmp_path / "faults"
    faults.mkdir()
    notify = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(notify))
        env = {"NOTIFY_SOCKET": str(notify)}
        hook = ("--test-fault-dir", str(faults))
        with DnsdProcess(DATA / "good", "--serving-loop", loop, *hook, env=env) as dnsd:
            until(lambda: answered(dnsd.port), 5, "first answer")
            assert ready(dnsd) == 200
            for _ in range(5):  # the compiled loop answers repeats from its cache
                assert answered(dnsd.port)
            before = metric(dnsd, "dnsd_serving_loop_answers_total", loop)
            assert before >= 1  # this loop's own code answered
            (faults / loop).touch()
            answered(dnsd.port)  # this batch raises
            until(lambda: ready(dnsd) == 503, 2, "/readyz 503 while the loop is down")
            statuses = [m for _, m in read_all(sock, 1.5) if "STATUS=serving loop down" in m]
            assert statuses and f"udp 127.0.0.1 port {dnsd.port}" in statuses[0]
            for _ in range(5):  # it keeps failing while the fault stands: logged once
                answered(dnsd.port)
            (faults / loop).unlink()
            until(lambda: ready(dnsd) == 200, 8, "/readyz back to 200")
            until(lambda: answered(dnsd.port), 2, "answers again")
            assert metric(dnsd, "dnsd_serving_loop_restarts_total", loop) >= 1
            failures = [line for line in dnsd.lines if f"the {loop} serving loop failed" in line]
            assert len(failures) == 1, failures
            assert any("InjectedFault" in line for line in dnsd.lines)  # the traceback, logged
            assert any(f"the {loop} serving loop is serving again" in x for x in dnsd.lines)
            back = [m for _, m in read_all(sock, 1.0) if "every loop is back" in m]
            assert back
            after = metric(dnsd, "dnsd_serving_loop_answers_total", loop)
            assert after > before


def test_a_failing_tcp_handler_is_logged_and_counted_and_tcp_goes_on(tmp_path: Path) -> None:
    faults = tmp_path / "faults"
    faults.mkdir()
    with DnsdProcess(DATA / "good", "--test-fault-dir", str(faults)) as dnsd:
        until(lambda: answered(dnsd.port, tcp=True), 5, "first TCP answer")
        (faults / "tcp").touch()
        for _ in range(3):
            assert not answered(dnsd.port, tcp=True)  # the connection ends, nothing silent
        (faults / "tcp").unlink()
        assert answered(dnsd.port, tcp=True)
        assert ready(dnsd) == 200  # the listener itself never stopped
        assert metric(dnsd, "dnsd_serving_loop_restarts_total", "tcp") == 3
        assert metric(dnsd, "dnsd_serving_loop_answers_total", "tcp") >= 2
        failures = [line for line in dnsd.lines if "tcp: a connection's handler failed" in line]
        assert 1 <= len(failures) <= 3 and any("InjectedFault" in x for x in dnsd.lines)
        assert not any("Unhandled exception" in line for line in dnsd.lines)  # not asyncio's


def test_a_dead_worker_is_not_ready_until_it_is_started_again(tmp_path: Path) -> None:
    with DnsdProcess(DATA / "good", "--workers", "2") as dnsd:
        dnsd.wait_for_log("worker process(es):")
        line = next(x for x in dnsd.lines if "worker process(es):" in x)
        pid = int(line.rsplit(":", 1)[1].split()[0])
        until(lambda: ready(dnsd) == 200, 10, "ready")
        os.kill(pid, signal.SIGKILL)
        until(lambda: ready(dnsd) == 503, 3, "/readyz 503 while a worker is dead")
        until(lambda: ready(dnsd) == 200, 10, "/readyz 200 with the worker back")
        assert metric(dnsd, "dnsd_serving_loop_restarts_total", "worker") == 1
        assert answered(dnsd.port)
