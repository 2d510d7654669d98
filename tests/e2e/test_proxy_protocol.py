"""PROXY protocol v2 in front of a real `dnsd serve --proxy-protocol-from 127.0.0.1/32`:
the carried source address decides the region (ECS-less geo), through a real dnsdist
(`useProxyProtocol=true`, UDP and TCP) and a real haproxy (`send-proxy-v2`, TCP); a query
without a header from the listed peer, or with one from a peer not listed, is dropped and
counted in dnsd_proxy_protocol_dropped_total{reason}.

A test socket stands in for a client elsewhere on the Internet by sending the header
itself: straight to dnsd, or to the balancer, which accepts it from 127.0.0.1 and then
forwards the client it carries in its own header (so the balancer's header format is
the one dnsd reads)."""

from __future__ import annotations

import re
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dnslib import DNSRecord

from dnsd.drill.ports import free_port_pair
from dnsd.net.proxy_protocol import SIGNATURE
from tests.admin_client import http
from tests.conftest import DATA
from tests.geo_fixture import write_city_db
from tests.processes import DnsdProcess

GB, JP = "81.2.69.142", "202.12.27.33"  # test-data addresses: GB → WEU → eu, JP → NEAS → asia
EU, ASIA, DEFAULT = "198.51.100.10", "203.0.113.10", "192.0.2.10"
TIMEOUT = 1.0  # a drop costs this long: answers on 127.0.0.1 take milliseconds


def proxy_header(src: str, sport: int = 40000, *, stream: bool = False) -> bytes:
    body = socket.inet_aton(src) + socket.inet_aton("127.0.0.1") + struct.pack("!HH", sport, 53)
    return SIGNATURE + bytes([0x21, 0x11 if stream else 0x12]) + struct.pack("!H", len(body)) + body


def query(name: str = "www.geo.test") -> DNSRecord:
    return DNSRecord.question(name)


def addresses(reply: bytes | None) -> list[str] | None:
    if reply is None:
        return None
    return [str(rr.rdata) for rr in DNSRecord.parse(reply).rr]


def udp(port: int, data: bytes, q: DNSRecord, source: str = "127.0.0.1") -> list[str] | None:
    """The answer's addresses, or None when no reply came."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.settimeout(TIMEOUT)
        s.send(data)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                reply = s.recv(65535)
            except (TimeoutError, ConnectionRefusedError):
                return None
            if reply[:2] == q.pack()[:2]:
                return addresses(reply)
    return None


def tcp(port: int, prefix: bytes, q: DNSRecord, source: str = "127.0.0.1") -> list[str] | None:
    wire = q.pack()
    with socket.create_connection(("127.0.0.1", port), TIMEOUT, (source, 0)) as s:
        s.sendall(prefix + struct.pack("!H", len(wire)) + wire)
        data = b""
        try:
            while len(data) < 2 or len(data) < 2 + struct.unpack("!H", data[:2])[0]:
                chunk = s.recv(65535)
                if not chunk:
                    return None
                data += chunk
        except (TimeoutError, ConnectionResetError):
            return None
    return addresses(data[2:])


def dropped(proc: DnsdProcess) -> dict[str, float]:
    text = http(proc.admin_port, "GET", "/metrics")[1]
    found = re.findall(r'dnsd_proxy_protocol_dropped_total\{reason="(\w+)"\} (\S+)', text)
    return {reason: float(value) for reason, value in found}


@pytest.fixture(scope="module", params=["compiled", "pure", "asyncio"])
def dnsd(tmp_path_factory, request) -> Iterator[DnsdProcess]:
    """Every UDP path reads the headers: the thread's compiled loop answers the cache's
    hits for proxied queries itself (`make test` builds it), its pure loop, the event
    loop's datagram protocol (`--udp-loop asyncio`)."""
    city = write_city_db(tmp_path_factory.mktemp("geo") / "city.mmdb")
    args = ("--geoip", str(city), "--proxy-protocol-from", "127.0.0.1/32")
    loop = (
        ("--udp-loop", "asyncio")
        if request.param == "asyncio"
        else ("--serving-loop", request.param)
    )
    with DnsdProcess(DATA / "geo", *args, *loop) as proc:
        if request.param != "asyncio":
            proc.wait_for_log(f"the {request.param} serving loop answers")
        yield proc


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_the_carried_source_decides_the_region(dnsd, transport) -> None:
    send = udp if transport == "udp" else tcp
    for client, expected in ((GB, EU), (JP, ASIA)):
        q = query()
        header = proxy_header(client, stream=transport == "tcp")
        prefix = header + q.pack() if transport == "udp" else header
        assert send(dnsd.port, prefix, q) == [expected], client
    q = query()  # LOCAL (a balancer's own health check): the peer itself, private → default
    local = SIGNATURE + b"\x20\x00\x00\x00"
    assert send(dnsd.port, local + q.pack() if transport == "udp" else local, q) == [DEFAULT]


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_missing_bad_and_unlisted_headers_are_dropped_and_counted(dnsd, transport) -> None:
    before = dropped(dnsd)
    q = query()
    if transport == "udp":
        assert udp(dnsd.port, q.pack(), q) is None  # the listed peer without a header
        bad = proxy_header(GB)[:13] + b"\x52" + proxy_header(GB)[14:]  # family 5
        assert udp(dnsd.port, bad + q.pack(), q) is None
        assert udp(dnsd.port, proxy_header(GB) + q.pack(), q, source="127.0.0.2") is None
        assert udp(dnsd.port, q.pack(), q, source="127.0.0.2") == [DEFAULT]  # not listed: plain
    else:
        assert tcp(dnsd.port, b"", q) is None
        bad = proxy_header(GB, stream=True)[:13] + b"\x51" + proxy_header(GB)[14:]
        assert tcp(dnsd.port, bad, q) is None
        assert tcp(dnsd.port, proxy_header(GB, stream=True), q, source="127.0.0.2") is None
        assert tcp(dnsd.port, b"", q, source="127.0.0.2") == [DEFAULT]
    after = dropped(dnsd)
    grew = {r: after[r] - before.get(r, 0) for r in after if after[r] != before.get(r, 0)}
    assert grew == {"missing": 1, "bad_family": 1, "unlisted_peer": 1}


def wait_for_port(port: int, kind: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the balancer exited"
        if kind == socket.SOCK_STREAM:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        else:
            return
    raise AssertionError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def dnsdist(dnsd, tmp_path_factory) -> Iterator[int]:
    binary = shutil.which("dnsdist")
    assert binary, "dnsdist is installed by `make test` (Debian package dnsdist)"
    port = free_port_pair()
    conf = Path(tmp_path_factory.mktemp("dnsdist")) / "dnsdist.conf"
    conf.write_text(
        f'setLocal("127.0.0.1:{port}")\n'
        'setACL({"127.0.0.0/8"})\n'
        'setProxyProtocolACL({"127.0.0.1/32"})\n'  # required from there: our test clients' own
        f'newServer({{address="127.0.0.1:{dnsd.port}", useProxyProtocol=true}})\n'
    )
    proc = subprocess.Popen([binary, "--supervised", "--disable-syslog", "-C", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_for_port(port, socket.SOCK_STREAM, proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_through_dnsdist_clients_get_their_regions(dnsd, dnsdist, transport) -> None:
    send = udp if transport == "udp" else tcp
    deadline = time.monotonic() + 10  # dnsdist's first health check marks dnsd up
    while True:  # a plain query from 127.0.0.2: dnsdist's header carries it (private → default)
        q = query()
        if send(dnsdist, b"" if transport == "tcp" else q.pack(), q, "127.0.0.2") == [DEFAULT]:
            break
        assert time.monotonic() < deadline, "no answer through dnsdist"
    before = dropped(dnsd)
    for client, expected in ((GB, EU), (JP, ASIA)):
        q = query()
        header = proxy_header(client, stream=transport == "tcp")
        assert send(dnsdist, header + q.pack() if transport == "udp" else header, q) == [
            expected
        ], client
    assert dropped(dnsd) == before  # dnsdist's headers were all read


@pytest.fixture(scope="module")
def haproxy(dnsd, tmp_path_factory) -> Iterator[int]:
    binary = shutil.which("haproxy")
    assert binary, "haproxy is installed by `make test` (Debian package haproxy)"
    port = free_port_pair()
    conf = Path(tmp_path_factory.mktemp("haproxy")) / "haproxy.cfg"
    conf.write_text(
        "defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 5s\n  timeout server 5s\n"
        f"frontend dns\n  bind 127.0.0.1:{port} accept-proxy\n  default_backend dnsd\n"
        f"backend dnsd\n  server d1 127.0.0.1:{dnsd.port} send-proxy-v2\n"
    )
    proc = subprocess.Popen([binary, "-db", "-f", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_for_port(port, socket.SOCK_STREAM, proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_through_haproxy_tcp_clients_get_their_regions(dnsd, haproxy) -> None:
    before = dropped(dnsd)
    for client, expected in ((GB, EU), (JP, ASIA)):
        q = query()
        # haproxy's accept-proxy takes our v2 header; its send-proxy-v2 carries the client on.
        assert tcp(haproxy, proxy_header(client, stream=True), q) == [expected], client
    assert dropped(dnsd) == before


def compiled_answers(proc: DnsdProcess) -> float:
    text = http(proc.admin_port, "GET", "/metrics")[1]
    found = re.search(r'dnsd_serving_loop_answers_total\{loop="compiled"\} (\S+)', text)
    return float(found.group(1)) if found else 0.0


def test_the_compiled_loop_answers_proxied_cache_hits(dnsd) -> None:
    """The answer cache's hits for proxied queries are answered by the compiled code,
    each client's from its own region (no fallback to Python for every proxied query)."""
    before = compiled_answers(dnsd)
    # A steered name's table is built for one client address (as without PROXY): each
    # client's repeats are the compiled code's, its first query fills the table.
    for client, expected in ((GB, EU), (JP, ASIA)):
        for _ in range(5):
            q = query()
            assert udp(dnsd.port, proxy_header(client) + q.pack(), q) == [expected], client
    grew = compiled_answers(dnsd) - before
    if "compiled" in dnsd.args:
        assert grew >= 8  # (a balancer's health checks may add some)
    else:
        assert grew == 0


def burst(port: int, client: str, n: int) -> int:
    """Send n proxied queries for `client` at once; how many replies came within a second."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("127.0.0.1", port))
        for _ in range(n):
            s.send(proxy_header(client) + query().pack())
        got, deadline = 0, time.monotonic() + 1.0
        while (left := deadline - time.monotonic()) > 0:
            s.settimeout(left)
            try:
                s.recv(65535)
            except TimeoutError:
                break
            got += 1
    return got


@pytest.mark.parametrize("loop", ["compiled", "pure"])
def test_rate_limiting_counts_the_carried_client(tmp_path, loop) -> None:
    """RRL's buckets are the carried clients' prefixes, not the balancer's: one client over
    the rate is held back, another behind the same balancer is not."""
    city = write_city_db(tmp_path / "city.mmdb")
    args = ("--geoip", str(city), "--proxy-protocol-from", "127.0.0.1/32", "--rrl-rate", "5",
            "--rrl-slip", "0", "--serving-loop", loop)  # fmt: skip
    with DnsdProcess(DATA / "geo", *args) as proc:
        assert burst(proc.port, GB, 40) <= 15  # a burst of 5, then 5 a second
        assert burst(proc.port, JP, 5) == 5
