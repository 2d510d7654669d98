"""Hostile input and overload over real sockets."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time

import pytest
from dnslib import DNSRecord

from dnsd.net.tcp import TcpLimits
from tests.admin_client import http
from tests.conftest import DATA, ServerThread
from tests.dnsclient import ask, make_query, tcp_raw, udp_raw
from tests.processes import DnsdProcess
from tests.waiting import real_time_passes, until


def test_200_idle_tcp_connections_do_not_stop_udp_or_new_tcp(server) -> None:
    idle = []
    try:
        for i in range(200):
            s = socket.socket()
            s.bind((f"127.0.{2 + i // 50}.1", 0))  # four /24s with 50 connections each
            s.connect(("127.0.0.1", server.port))
            idle.append(s)
        until(lambda: server.server.counters.tcp_connections >= 200, 5.0, "200 connections taken")
        started = time.monotonic()
        assert ask(server.port, "mail.example.test").rr
        assert ask(server.port, "mail.example.test", tcp=True).rr
        assert time.monotonic() - started < 1.0
    finally:
        for s in idle:
            s.close()


def test_one_client_cannot_take_every_connection(config_copy) -> None:
    srv = ServerThread(config_copy, tcp_limits=TcpLimits(max_per_client=5))
    srv.start()
    held = []
    try:
        for _ in range(5):
            s = socket.socket()
            s.bind(("127.0.9.9", 0))
            s.connect(("127.0.0.1", srv.port))
            held.append(s)
        until(lambda: srv.server.counters.tcp_connections >= 5, 5.0, "5 connections taken")
        extra = socket.socket()
        extra.bind(("127.0.9.200", 0))  # another address of the same /24
        extra.connect(("127.0.0.1", srv.port))
        extra.settimeout(2)
        assert extra.recv(1) == b""  # closed at once
        extra.close()
        assert ask(srv.port, "mail.example.test", tcp=True).rr  # another client still gets in
        assert srv.server.counters.tcp_rejected == 1
    finally:
        for s in held:
            s.close()
        srv.stop()


def test_rrl_limits_a_flooding_prefix_while_another_gets_every_answer() -> None:
    wire = make_query("mail.example.test").pack()
    replies: list[bytes] = []
    with DnsdProcess(DATA / "good", "--rrl-rate", "20", "--rrl-slip", "2") as dnsd:
        flood = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        flood.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        flood.bind(("127.0.1.1", 0))
        flood.settimeout(0.5)
        victim_ok: list[bool] = []

        def other_prefix() -> None:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind(("127.0.2.1", 0))
                s.settimeout(1.0)
                for _ in range(20):  # 10 queries/s: a real client under the 20/s limit
                    s.sendto(wire, ("127.0.0.1", dnsd.port))
                    r = DNSRecord.parse(s.recv(4096))
                    victim_ok.append(r.header.tc == 0 and bool(r.rr))
                    real_time_passes(0.1, "a client's pace")

        thread = threading.Thread(target=other_prefix)
        thread.start()
        started = time.monotonic()
        for _ in range(1000):  # ~500 queries/s from one /24 for about 2 s
            flood.sendto(wire, ("127.0.0.1", dnsd.port))
            real_time_passes(0.002, "the flood's pace")
        elapsed = time.monotonic() - started
        try:
            while True:
                replies.append(flood.recv(4096))
        except TimeoutError:
            pass
        thread.join()
        flood.close()
        _, metrics = http(dnsd.admin_port, "GET", "/metrics")
    full = [r for r in replies if not DNSRecord.parse(r).header.tc]
    slipped = [r for r in replies if DNSRecord.parse(r).header.tc]
    assert len(full) <= 20 + 20 * (elapsed + 0.6) + 1  # the burst, then the rate
    assert len(slipped) >= 300  # every second limited reply goes out truncated
    assert victim_ok == [True] * 20  # another /24 got every answer in full
    dropped = next(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith('dnsd_rrl_total{action="dropped"}')
    )
    assert dropped >= 300


def send_continuously(port: int, stop: threading.Event, results: list[str]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1.0)
        while not stop.is_set():
            q = make_query("mail.example.test")
            try:
                s.sendto(q.pack(), ("127.0.0.1", port))
                r = DNSRecord.parse(s.recv(4096))
                results.append("SERVFAIL" if r.header.rcode == 2 else "ok" if r.rr else "empty")
            except TimeoutError:
                results.append("lost")
            real_time_passes(0.002, "the load's pace")


def test_twenty_sighup_reloads_under_load_lose_nothing(config_copy) -> None:
    with DnsdProcess(config_copy, "--rrl-rate", "0") as dnsd:
        stop, results = threading.Event(), []
        sender = threading.Thread(target=send_continuously, args=(dnsd.port, stop, results))
        sender.start()
        try:
            for i in range(20):
                dnsd.signal(signal.SIGHUP)
                dnsd.wait_for_log(f"generation {i + 2}")
            until(lambda: len(results) > 100, 5.0, "100 answers")  # fast reloads: more load
        finally:
            stop.set()
            sender.join()
    assert len(results) > 100
    assert results.count("lost") == 0 and results.count("SERVFAIL") == 0
    assert set(results) == {"ok"}


def test_sigterm_during_load_exits_0_and_keeps_the_overrides_file(config_copy, tmp_path) -> None:
    state = tmp_path / "state"
    dnsd = DnsdProcess(
        config_copy, "--state-dir", str(state), "--rrl-rate", "0", env={"DNSD_ADMIN_TOKEN": "t"}
    )
    with dnsd:
        assert (
            http(dnsd.admin_port, "PUT", "/api/v1/overrides/pools/us-east", {"state": "down"}, "t")[
                0
            ]
            == 200
        )
        stop, results = threading.Event(), []
        sender = threading.Thread(target=send_continuously, args=(dnsd.port, stop, results))
        sender.start()
        # Open connections at the moment of SIGTERM: idle, mid-query, a half-sent admin request.
        held = [socket.create_connection(("127.0.0.1", dnsd.port)) for _ in range(3)]
        held[0].sendall(b"\x00\x30partial")
        held.append(socket.create_connection(("127.0.0.1", dnsd.admin_port)))
        held[-1].sendall(b"GET /metrics HTTP/1.1\r\n")
        until(lambda: len(results) >= 20, 5.0, "the load flowing")  # and the connections in
        dnsd.signal(signal.SIGTERM)
        code = dnsd.proc.wait(timeout=10)  # type: ignore[union-attr]
        stop.set()
        sender.join()
        for s in held:
            s.close()
    assert code == 0
    assert "stopping" in dnsd.output
    assert "Traceback" not in dnsd.output and " ERROR " not in dnsd.output, dnsd.output
    assert json.loads((state / "overrides.json").read_text())["pools"] == {"us-east": "down"}
    # the load flowed until the signal (the 20 awaited above); what the stop cuts is "lost"
    assert results.count("ok") >= 20 and "SERVFAIL" not in results and "empty" not in results


@pytest.mark.parametrize("size", [0, 1, 11])
def test_tcp_frames_that_are_too_short_are_answered_or_closed(server, size) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as s:
        s.sendall(size.to_bytes(2, "big") + b"\x00" * size)
        s.settimeout(2)
        assert s.recv(100) == b""  # a frame with no header is dropped with the connection
    assert ask(server.port, "mail.example.test", tcp=True).rr


def raw_query(labels: list[bytes], qtype: int = 1, ident: int = 0x4242) -> bytes:
    name = b"".join(bytes([len(label)]) + label for label in labels) + b"\0"
    return (
        ident.to_bytes(2, "big")
        + b"\x01\0\0\x01\0\0\0\0\0\0"
        + name
        + qtype.to_bytes(2, "big")
        + b"\0\1"
    )


@pytest.mark.parametrize(
    ("labels", "rcode", "answer"),
    [
        ([b"a.b", b"apps", b"example", b"test"], 0, "192.0.2.99"),  # the wildcard matches it
        ([b"www.example", b"test"], 5, None),  # one label "www.example" under test.: REFUSED
        ([b"WWW.EXAMPLE", b"TEST"], 5, None),
        ([b"mail.example", b"example", b"test"], 0, None),  # apex "*" has TXT only: NODATA
        ([b".", b"example", b"test"], 0, None),  # used to be SERVFAIL and a traceback
        ([b".."], 5, None),
        ([b"\\", "é.".encode(), b"example", b"test"], 0, None),
        ([b"\xff.", b"example", b"test"], 1, None),  # not UTF-8: dnslib refuses (FORMERR)
    ],
)
def test_names_with_dots_inside_labels_are_answered_as_the_zone_says(
    server, labels, rcode, answer
) -> None:
    """RFC 1035 allows any byte in a label: such a name is neither another name nor an
    error."""
    query = raw_query(labels)
    raw = udp_raw(server.port, query)
    assert raw is not None
    reply = DNSRecord.parse(raw)
    assert reply.header.rcode == rcode
    if rcode != 1:
        assert raw[12 : 12 + len(query) - 16] == query[12:-4]  # the question, byte for byte
    assert [str(rr.rdata) for rr in reply.rr] == ([answer] if answer else [])
    tcp = DNSRecord.parse(tcp_raw(server.port, query))  # and the same over TCP (no cache)
    assert tcp.header.rcode == rcode


def monitored_zone(zone: str, port: int) -> str:
    """A zone whose www is one HTTP-monitored backend at 127.0.0.71:PORT (fallback: an
    unmonitored one), plus a wildcard: what the hostile-traffic tests check answers of."""
    return f"""\
zone: {zone}
soa: {{mname: ns1.{zone}., rname: h.{zone}., minimum: 1}}
records:
  "@": {{NS: ns1.{zone}.}}
  ns1: {{A: 127.0.0.1}}
  "*.wild": {{A: 192.0.2.99}}
  www: {{lb: www}}
monitors:
  web: {{type: http, path: /healthz, interval: 0.2s, timeout: 0.5s, healthy_threshold: 1,
        unhealthy_threshold: 2}}
pools:
  main: {{monitor: web, backends: [{{name: b1, address: 127.0.0.71, port: {port}}}]}}
  sorry: {{backends: [{{name: s1, address: 192.0.2.250}}]}}
load_balancers:
  www: {{ttl: 1, default_pools: [main], fallback_pool: sorry}}
"""


def test_idle_admin_connections_cannot_starve_probes_or_dns(tmp_path) -> None:
    """10,000 idle admin connections against a process with 256 descriptors: probes keep
    passing (answers do not move), DNS over TCP answers, the admin API still serves."""
    from dnsd.drill.backend import DemoBackend
    from tests.loop_thread import LoopThread

    loop = LoopThread()
    backend = loop.call(DemoBackend("b1", host="127.0.0.71", control_port=None).start())
    (tmp_path / "zones").mkdir()
    (tmp_path / "zones" / "hard.yaml").write_text(monitored_zone("hard.test", backend.port))
    held: list[socket.socket] = []
    try:
        with DnsdProcess(tmp_path / "zones", "--rrl-rate", "0", nofile=256) as dnsd:
            assert str(ask(dnsd.port, "www.hard.test").rr[0].rdata) == "127.0.0.71"
            for i in range(10_000):
                # A connect either completes in the kernel at once (loopback) or its SYN
                # was dropped, the accept queue full: the kernel sends it again only
                # after 1 s, so waiting longer than a moment for it only made the test
                # wait (35 such waits: 35 of its 46 s).
                try:
                    s = socket.create_connection(("127.0.0.1", dnsd.admin_port), timeout=0.2)
                except OSError:
                    continue  # refused or reset: the server is guarding its descriptors
                held.append(s)
                if len(held) > 300:  # this test process has its own limit too
                    held.pop(0).close()
                if i % 1000 == 0:
                    assert str(ask(dnsd.port, "www.hard.test").rr[0].rdata) == "127.0.0.71"
            probes = sum(backend.requests.values())  # five probe intervals, connections held
            until(lambda: sum(backend.requests.values()) >= probes + 5, 5.0, "five more probes")
            assert str(ask(dnsd.port, "www.hard.test").rr[0].rdata) == "127.0.0.71"
            assert str(ask(dnsd.port, "www.hard.test", tcp=True).rr[0].rdata) == "127.0.0.71"
            status, body = http(dnsd.admin_port, "GET", "/readyz")
            assert status == 200 and body["ready"] is True
            assert "Too many open files" not in dnsd.output
    finally:
        for s in held:
            s.close()
        loop.call(backend.stop())
        loop.close()
