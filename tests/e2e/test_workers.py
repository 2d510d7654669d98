"""`dnsd serve --workers 3`: three processes answer on one port with SO_REUSEPORT, one of
them probes, all follow its health view and its reloads."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest
from dnslib import DNSRecord
from prometheus_client.parser import text_string_to_metric_families

from dnsd.drill.backend import DemoBackend
from tests.admin_client import http
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

INTERVAL, THRESHOLD, TIMEOUT = 0.3, 2, 0.3
SOCKETS = 48  # client source ports: the kernel spreads them over the processes


def config(port: int, extra: str = "") -> str:
    return f"""\
zone: wk.test
soa: {{mname: ns1.wk.test., rname: h.wk.test., minimum: 1}}
records:
  "@": {{NS: ns1.wk.test.}}
  ns1: {{A: 127.0.0.1}}
  www: {{lb: www}}
{extra}monitors:
  web: {{type: http, path: /healthz, interval: {INTERVAL}s, timeout: {TIMEOUT}s, healthy_threshold: 2, unhealthy_threshold: {THRESHOLD}}}
pools:
  primary: {{monitor: web, backends: [{{name: a, address: 127.0.0.91, port: {port}}}]}}
  backup: {{backends: [{{name: b, address: 127.0.0.92}}]}}
load_balancers:
  www: {{ttl: 1, default_pools: [primary, backup]}}
"""


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def ask_all(
    port: int, name: str = "www.wk.test", wait: float = 1.0, qtype: str = "A"
) -> list[str | None]:
    """One query from each of SOCKETS source ports; each answer's first address (or the
    rcode name), None where nothing came back in time."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(SOCKETS)]
    try:
        for i, s in enumerate(socks):
            q = DNSRecord.question(name, qtype)
            q.header.id = i + 1
            s.sendto(q.pack(), ("127.0.0.1", port))
        out: list[str | None] = []
        deadline = time.monotonic() + wait
        for s in socks:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                reply = DNSRecord.parse(s.recv(4096))
            except TimeoutError:
                out.append(None)
                continue
            out.append(str(reply.rr[0].rdata) if reply.rr else str(reply.header.rcode))
        return out
    finally:
        for s in socks:
            s.close()


@pytest.fixture
def served(tmp_path):
    loop = LoopThread()
    backend = loop.call(DemoBackend("a", host="127.0.0.91", control_port=None).start())
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "wk.yaml").write_text(config(backend.port))
    proc = DnsdProcess(zones, "--workers", "3", "--rrl-rate", "0").__enter__()
    try:
        proc.wait_for_log("started 2 worker process(es)")
        deadline = time.monotonic() + 15
        while sum("listening on" in line for line in proc.lines) < 3:  # workers bound too
            assert time.monotonic() < deadline, proc.output
            time.sleep(0.05)
        while ask_all(proc.port).count("127.0.0.91") < SOCKETS:  # every process answers
            assert time.monotonic() < deadline, proc.output
            time.sleep(0.1)
        yield {"loop": loop, "backend": backend, "proc": proc, "zones": zones}
    finally:
        proc.stop()
        loop.call(backend.stop())
        loop.close()


def test_workers_answer_beside_the_main_process(served) -> None:
    proc = served["proc"]
    assert proc.proc is not None
    assert len(children(proc.proc.pid)) == 2
    proc.signal(signal.SIGSTOP)  # the main process stops answering: the workers do not
    try:
        answered = ask_all(proc.port, wait=0.8)
    finally:
        proc.signal(signal.SIGCONT)
    # Two workers of three processes: about 2/3 answered; the rest wait in the main
    # process's socket (answered after SIGCONT).
    assert SOCKETS // 3 <= sum(a == "127.0.0.91" for a in answered) < SOCKETS, answered


def test_metrics_of_the_main_process_count_every_process(served) -> None:
    proc = served["proc"]
    proc.signal(signal.SIGSTOP)  # so some of these are surely answered by workers alone
    try:
        by_workers = sum(a == "127.0.0.91" for a in ask_all(proc.port, wait=0.8))
    finally:
        proc.signal(signal.SIGCONT)
    assert by_workers > 0

    def answered() -> float:
        status, text = http(proc.admin_port, "GET", "/metrics")
        assert status == 200
        return sum(
            s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "dnsd_queries_total" and s.labels["rcode"] == "NOERROR"
        )

    def settled() -> float:  # every worker has reported what it answered so far
        last = answered()
        while True:
            time.sleep(1.5)
            now = answered()
            if now == last:
                return now
            last = now

    before = settled()
    assert before >= SOCKETS + by_workers
    for _ in range(3):
        assert ask_all(proc.port).count("127.0.0.91") == SOCKETS
    deadline = time.monotonic() + 5  # workers report every second
    while answered() - before < 3 * SOCKETS:
        assert time.monotonic() < deadline, answered() - before
        time.sleep(0.2)
    assert settled() - before == 3 * SOCKETS  # each counted once, whoever answered


def test_one_prober_and_every_process_follows_its_view(served) -> None:
    backend, proc, loop = served["backend"], served["proc"], served["loop"]
    before = sum(backend.requests.values())
    time.sleep(3.0)
    probes = sum(backend.requests.values()) - before
    assert 3.0 / INTERVAL * 0.5 <= probes <= 3.0 / INTERVAL + 2, probes  # one prober, not three
    loop.call(backend.set_mode("503"))
    failed_at = time.monotonic()
    while set(ask_all(proc.port)) != {"127.0.0.92"}:
        assert time.monotonic() - failed_at < INTERVAL * THRESHOLD + TIMEOUT + 2.0
        time.sleep(0.05)
    loop.call(backend.set_mode("ok"))
    while set(ask_all(proc.port)) != {"127.0.0.91"}:
        assert time.monotonic() - failed_at < 15
        time.sleep(0.05)


def test_a_reload_reaches_every_process(served) -> None:
    proc, zones = served["proc"], served["zones"]
    soa_before = set(ask_all(proc.port, "wk.test", qtype="SOA"))
    assert len(soa_before) == 1  # `serial: auto`: every process serves the main's serial
    (zones / "wk.yaml").write_text(config(served["backend"].port, extra="  new: {A: 192.0.2.77}\n"))
    proc.signal(signal.SIGHUP)
    started = time.monotonic()
    while set(ask_all(proc.port, "new.wk.test")) != {"192.0.2.77"}:
        assert time.monotonic() - started < 10, proc.output
        time.sleep(0.1)
    soa_after = set(ask_all(proc.port, "wk.test", qtype="SOA"))
    assert len(soa_after) == 1 and soa_after != soa_before  # a new serial, the same everywhere
    backend = served["backend"]
    before = sum(backend.requests.values())
    time.sleep(2.0)
    probes = sum(backend.requests.values()) - before
    assert probes <= 2.0 / INTERVAL + 2, probes  # still one prober after the reload
    assert "Traceback" not in proc.output, proc.output


def test_a_dead_worker_is_started_again_and_all_stop_together(served) -> None:
    proc = served["proc"]
    assert proc.proc is not None
    first = children(proc.proc.pid)
    victim = first[0]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while True:
        now = children(proc.proc.pid)
        if len(now) == 2 and victim not in now:
            break
        assert time.monotonic() < deadline, now
        time.sleep(0.1)
    while sum("listening on" in line for line in proc.lines) < 4:  # the new one is bound
        assert time.monotonic() < deadline + 10, proc.output
        time.sleep(0.05)
    proc.signal(signal.SIGSTOP)  # and answers: the two workers answer without the main one
    try:
        answered = ask_all(proc.port, wait=0.8)
    finally:
        proc.signal(signal.SIGCONT)
    assert sum(a == "127.0.0.91" for a in answered) >= SOCKETS // 3, answered
    workers = children(proc.proc.pid)
    proc.signal(signal.SIGTERM)
    assert proc.proc.wait(10) == 0
    time.sleep(0.5)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]
