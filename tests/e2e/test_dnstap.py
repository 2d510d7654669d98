"""dnstap with real peers: `dnstap-read` (BIND) and `kdig -G` (Knot) read a `--dnstap-file`
written while `dig` asked; `fstrm_capture` (fstrm-bin) is the socket reader, killed and
started again (the writer connects again), and stopped (SIGSTOP) while queries flood in:
the queue fills, the overflow is dropped and counted, and the answers do not slow down. The
load-balanced answer's decision is read from the frames with the dnstap protobuf classes."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import dnstap_pb
import pytest

from dnsd.drill.ports import free_port_pair
from tests.dnsclient import make_query
from tests.processes import DnsdProcess

pytestmark = pytest.mark.slow
ZONES = "zones"
GERMANY = "5.9.0.0/16"  # ECS: a client in Germany (the embedded GeoIP database) → WEU


def dig(port: int, *args: str) -> str:
    cmd = ["dig", "@127.0.0.1", "-p", str(port), "+tries=1", "+time=2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout


def dnstap_read(path: Path) -> list[str]:
    out = subprocess.run(["dnstap-read", str(path)], capture_output=True, text=True,
                         timeout=10, check=True).stdout  # fmt: skip
    return out.splitlines()


def kdig_read(path: Path) -> list[dict[str, str]]:
    """`kdig -G FILE +qr`: Knot's own dnstap decoder, every message printed as kdig prints
    what it sends and receives. Per message: `id`, `flags`, `question`, `answer` (the
    first answer record, or ""), `subnet` (the ECS option, or ""), and `direction`
    ("From": a query received from the client, "To": a response sent to it), `client`,
    `port`, `transport`, from its last line."""
    cmd = ["kdig", "-G", str(path), "+qr"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
    found = []
    for block in out.split(";; ->>HEADER<<-")[1:]:
        ends = re.search(r";; (From|To) ([\d.:a-f]+)@(\d+)\((UDP|TCP)\)", block)
        question = re.search(r";; QUESTION SECTION:\n;; (\S+)\s+IN\s+(\S+)", block)
        answer = re.search(r";; ANSWER SECTION:\n(.+)", block)
        subnet = re.search(r";; CLIENT-SUBNET: (\S+)", block)
        assert ends and question, block
        found.append(
            {
                "id": first(r"id: (\d+)", block),
                "flags": first(r";; Flags: ([^;]*);", block).strip(),
                "question": f"{question[1]} {question[2]}",
                "answer": " ".join(answer[1].split()) if answer else "",
                "subnet": subnet[1] if subnet else "",
                "direction": ends[1],
                "client": ends[2],
                "port": ends[3],
                "transport": ends[4],
            }
        )
    return found


def first(pattern: str, text: str) -> str:
    """The first group of `pattern`'s first match in `text` (which must have one)."""
    match = re.search(pattern, text)
    assert match, f"no {pattern!r} in {text!r}"
    return match.group(1)


def messages(path: Path) -> list[dnstap_pb.Dnstap]:
    """The dnstap messages of a Frame Streams file (its control frames skipped)."""
    data, i, out = path.read_bytes(), 0, []
    while i + 4 <= len(data):
        (length,) = struct.unpack("!I", data[i : i + 4])
        i += 4
        if length == 0:  # a control frame: its own length follows
            (length,) = struct.unpack("!I", data[i : i + 4])
            i += 4 + length
            continue
        tap = dnstap_pb.Dnstap()
        tap.ParseFromString(data[i : i + length])
        out.append(tap)
        i += length
    return out


@pytest.mark.parametrize("udp_loop", ["thread", "asyncio"])
def test_dnstap_file_read_by_dnstap_read_and_kdig(tmp_path: Path, udp_loop: str) -> None:
    tap = tmp_path / "queries.tap"
    with DnsdProcess(ZONES, "--dnstap-file", str(tap), "--dnstap-identity", "ns-test",
                     "--udp-loop", udp_loop) as dnsd:  # fmt: skip
        # dig's source ports, free for TCP too (a UDP-only check let a TCP port in use
        # through, and dig then asked from another)
        udp_port, tcp_port = free_port_pair(), free_port_pair()
        asked = [
            dig(dnsd.port, "-b", f"127.0.0.1#{udp_port}", "www.example.test", f"+subnet={GERMANY}"),
            dig(dnsd.port, "-b", f"127.0.0.1#{tcp_port}", "+tcp", "mail.example.test", "AAAA"),
        ]
        port = dnsd.port
    lines = dnstap_read(tap)  # the server stopped: the stream ended with STOP
    assert f" AQ 127.0.0.1:{udp_port} -> 127.0.0.1:{port} UDP " in lines[0], lines
    assert lines[0].endswith("www.example.test/IN/A")
    assert f" AR 127.0.0.1:{udp_port} <- 127.0.0.1:{port} UDP " in lines[1], lines
    assert f" AQ 127.0.0.1:{tcp_port} -> 127.0.0.1:{port} TCP " in lines[2], lines
    assert lines[2].endswith("mail.example.test/IN/AAAA")
    assert f" AR 127.0.0.1:{tcp_port} <- 127.0.0.1:{port} TCP " in lines[3], lines
    assert len(lines) == 4

    # The second decoder: Knot's kdig reads the same file, every query and response.
    udp_id, tcp_id = (first(r"id: (\d+)", out) for out in asked)
    read = kdig_read(tap)
    assert [(m["direction"], m["id"], m["transport"], m["port"]) for m in read] == [
        ("From", udp_id, "UDP", str(udp_port)),
        ("To", udp_id, "UDP", str(udp_port)),
        ("From", tcp_id, "TCP", str(tcp_port)),
        ("To", tcp_id, "TCP", str(tcp_port)),
    ], read
    assert {m["client"] for m in read} == {"127.0.0.1"}
    assert [m["question"] for m in read] == ["www.example.test. A"] * 2 + [
        "mail.example.test. AAAA"
    ] * 2
    assert "qr" not in read[0]["flags"].split() and "qr" not in read[2]["flags"].split()
    assert {"qr", "aa"} <= set(read[1]["flags"].split()) & set(read[3]["flags"].split())
    assert read[0]["subnet"] == f"{GERMANY}/0" and read[1]["subnet"] == f"{GERMANY}/16"
    assert read[1]["answer"].startswith("www.example.test. 30 IN A ")
    assert read[1]["answer"].split()[-1] in asked[0]  # the address dig was sent
    assert read[3]["answer"] == "mail.example.test. 3600 IN AAAA 2001:db8::25"
    assert read[0]["answer"] == read[2]["answer"] == ""

    taps = messages(tap)
    assert {t.identity for t in taps} == {b"ns-test"}
    response = taps[1].message
    assert response.type == dnstap_pb.Message.AUTH_RESPONSE
    assert response.response_message[2] & 0x80  # QR: the reply's wire bytes
    assert response.response_time_sec >= response.query_time_sec > 0
    policy = response.policy
    assert policy.type == "dnsd"
    assert policy.rule == b"web -> eu-west"  # Germany: the WEU region's first pool
    assert policy.match == dnstap_pb.Policy.CLIENT_IP
    assert policy.value == b"WEU"
    assert policy.action == dnstap_pb.Policy.LOCAL_DATA
    assert not taps[0].message.HasField("policy")  # the query carries no decision
    assert not taps[3].message.HasField("policy")  # a static answer: no decision


def test_dnstap_file_sample_and_messages(tmp_path: Path) -> None:
    """`--dnstap-sample 2`: every second query; the server file's `messages` picks types.
    Both serving paths: dig's cookie takes the Python path, without one the compiled loop
    answers from the zone tables and keeps the frames itself."""
    tap = tmp_path / "q.tap"
    server_file = tmp_path / "server.yaml"
    server_file.write_text(f"dnstap:\n  file: {tap}\n  messages: [auth_response]\n  sample: 2\n")
    with DnsdProcess(ZONES, "--config", str(server_file)) as dnsd:
        for _ in range(6):
            dig(dnsd.port, "mail.example.test", "AAAA")
        before = metric(dnsd.admin_port, COMPILED)
        for _ in range(6):
            dig(dnsd.port, "+nocookie", "mail.example.test", "MX")
        assert metric(dnsd.admin_port, COMPILED) - before == 6
    lines = dnstap_read(tap)
    assert len(lines) == 6 and all(" AR " in line for line in lines), lines
    assert sum(line.endswith("mail.example.test/IN/MX") for line in lines) == 3, lines


COMPILED = 'dnsd_serving_loop_answers_total{loop="compiled"}'


def test_compiled_loop_answers_are_in_the_file(tmp_path: Path) -> None:
    """The compiled loop answers a load-balanced name's repeats and the zone's own names in
    C and keeps their frames itself: each query and response is in the file with the
    fields the Python path writes, the decision too (encoded alike: equal bytes)."""
    tap = tmp_path / "compiled.tap"
    asked: list[tuple[bytes, bytes]] = []
    began = time.time()
    flags = ("--dnstap-identity", "ns-c", "--serving-loop", "compiled", "--rrl-rate", "0")
    with DnsdProcess(ZONES, "--dnstap-file", str(tap), *flags) as dnsd:
        before = metric(dnsd.admin_port, COMPILED)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(2)
            s.connect(("127.0.0.1", dnsd.port))
            questions = [("www.example.test", "A")] * 4 + [("mail.example.test", "AAAA")] * 2
            for name, qtype in questions:
                query = make_query(name, qtype)
                query.header.id = 1000 + len(asked)
                s.send(query.pack())
                asked.append((bytes(query.pack()), s.recv(4096)))
            client_port = s.getsockname()[1]
        in_c = metric(dnsd.admin_port, COMPILED) - before
        port = dnsd.port
    # www's first answer or two come from Python (then its table is published), the
    # rest from C; mail's from the zone tables, in C
    assert in_c >= 4, in_c
    assert len(dnstap_read(tap)) == 2 * len(asked)  # BIND's reader takes the frames too
    taps = messages(tap)
    assert len(taps) == 2 * len(asked)
    queries = {t.message.query_message: t for t in taps if t.message.HasField("query_message")}
    replies = {
        t.message.response_message: t for t in taps if t.message.HasField("response_message")
    }
    policies = set()
    loopback = socket.inet_aton("127.0.0.1")
    for wire, reply in asked:
        q, r = queries[wire], replies[reply]
        assert q.message.type == dnstap_pb.Message.AUTH_QUERY
        assert r.message.type == dnstap_pb.Message.AUTH_RESPONSE
        for t in (q, r):
            assert (t.identity, t.version, t.type) == (b"ns-c", b"dnsd", dnstap_pb.Dnstap.MESSAGE)
            m = t.message
            assert (m.socket_family, m.socket_protocol) == (dnstap_pb.INET, dnstap_pb.UDP)
            assert (m.query_address, m.query_port) == (loopback, client_port)
            assert (m.response_address, m.response_port) == (loopback, port)
            assert began - 1 <= m.query_time_sec + m.query_time_nsec / 1e9 <= time.time()
        m = r.message
        assert m.query_time_sec == q.message.query_time_sec
        assert (m.response_time_sec, m.response_time_nsec) >= (m.query_time_sec, m.query_time_nsec)
        assert m.HasField("policy") == (b"\x03www" in wire)  # the load-balanced name
        if m.HasField("policy"):
            policies.add(m.policy.SerializeToString())
            assert m.policy.rule.startswith(b"web -> ")
    assert len(policies) == 1  # the Python path's (the first) and C's (the repeats) agree


class Capture:
    """fstrm_capture reading SOCK into OUT; its debug log says when a writer connects (it
    buffers its file until it closes)."""

    def __init__(self, sock: Path, out: Path) -> None:
        self.log = out.with_suffix(".log")
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(["fstrm_capture", "-ddd", "-t", "protobuf:dnstap.Dnstap",
                                          "-u", str(sock), "-w", str(out)],
                                         stdout=subprocess.DEVNULL, stderr=log)  # fmt: skip
        self.wait_for("opening Unix socket")

    def wait_for(self, text: str, count: int = 1, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while self.log.read_text().count(text) < count:
            assert time.monotonic() < deadline, f"fstrm_capture: no {text!r}"
            time.sleep(0.02)

    def end(self) -> None:
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGINT)  # it writes and closes its file
        self.proc.wait(timeout=10)


def test_fstrm_capture_reader_restarted(tmp_path: Path) -> None:
    assert shutil.which("fstrm_capture"), "fstrm_capture is installed by make deps (fstrm-bin)"
    sock, second = tmp_path / "dnstap.sock", tmp_path / "second.tap"
    reader = Capture(sock, tmp_path / "first.tap")
    with DnsdProcess(ZONES, "--dnstap-socket", str(sock)) as dnsd:
        try:
            reader.wait_for("accepted new connection")
            dig(dnsd.port, "www.example.test")
            reader.proc.kill()  # the reader is lost, without a clean close
            reader.proc.wait()
            sock.unlink()
            dig(dnsd.port, "mail.example.test", "AAAA")  # kept while nobody reads
            reader = Capture(sock, second)
            reader.wait_for("accepted new connection")  # connected again, with back-off
            dig(dnsd.port, "api.example.test")
            time.sleep(0.5)
        finally:
            reader.end()
    lines = dnstap_read(second)
    assert any("mail.example.test/IN/AAAA" in line and " AQ " in line for line in lines), lines
    assert any("api.example.test/IN/A" in line and " AR " in line for line in lines), lines


def metric(admin_port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5).read()
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def test_stalled_reader_drops_are_counted_and_answers_stay_fast(tmp_path: Path) -> None:
    """fstrm_capture stopped (SIGSTOP): it accepts nothing more, the socket's buffer and
    then the compiled loop's buffer of frames (4 MiB: about 17,000 of these answers) fill,
    and the rest is dropped and counted while every query is still answered quickly."""
    sock = tmp_path / "dnstap.sock"
    reader = Capture(sock, tmp_path / "out.tap")
    try:
        # --rrl-rate 0: one client's 40,000 identical queries, none rate-limited
        with DnsdProcess(ZONES, "--dnstap-socket", str(sock), "--rrl-rate", "0") as dnsd:
            reader.wait_for("accepted new connection")
            reader.proc.send_signal(signal.SIGSTOP)
            query = make_query("mail.example.test", "AAAA").pack()
            slowest, answered = 0.0, 0
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.settimeout(2)
                s.connect(("127.0.0.1", dnsd.port))
                for _ in range(40_000):
                    began = time.perf_counter()
                    s.send(query)
                    s.recv(4096)
                    slowest = max(slowest, time.perf_counter() - began)
                    answered += 1
            assert answered == 40_000
            assert slowest < 0.5, f"an answer took {slowest:.3f} s"
            dropped = metric(dnsd.admin_port, "dnsd_dnstap_dropped_total")
            assert dropped > 1000, dropped
    finally:
        reader.end()
