"""Protocol behaviour over real sockets: EDNS0, truncation, malformed input, TCP framing."""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest
from dnslib import EDNS0, OPCODE, QTYPE, RCODE, DNSRecord, EDNSOption

from dnsd.net.tcp import TcpLimits
from tests.conftest import DATA, ServerThread
from tests.dnsclient import ask, make_query, read_frame, tcp_raw, udp_raw
from tests.waiting import real_time_passes, until


def still_answers(port: int) -> None:
    reply = ask(port, "mail.example.test", "A")
    assert str(reply.rr[0].rdata) == "192.0.2.25"


def opt_of(reply: DNSRecord):
    opts = [rr for rr in reply.ar if rr.rtype == QTYPE.OPT]
    assert len(opts) <= 1
    return opts[0] if opts else None


# -- EDNS0 (RFC 6891) ------------------------------------------------------------------------
@pytest.mark.parametrize("tcp", [False, True])
def test_edns_query_gets_opt_with_our_payload(server, tcp: bool) -> None:
    reply = ask(server.port, "mail.example.test", "A", edns=True, payload=4096, tcp=tcp)
    opt = opt_of(reply)
    assert opt is not None and opt.rclass == 1232
    assert (opt.ttl >> 16) & 0xFF == 0  # version 0


def test_plain_query_gets_no_opt(server) -> None:
    assert opt_of(ask(server.port, "mail.example.test", "A")) is None


def test_edns_version_above_zero_is_badvers(server) -> None:
    q = make_query("mail.example.test")
    q.add_ar(EDNS0(version=1, udp_len=1232))
    reply = DNSRecord.parse(udp_raw(server.port, q.pack()))
    opt = opt_of(reply)
    assert opt is not None
    extended_rcode = ((opt.ttl >> 24) << 4) | reply.header.rcode
    assert extended_rcode == 16  # BADVERS
    assert not reply.rr


def test_unknown_edns_options_and_flags_are_ignored(server) -> None:
    q = make_query("mail.example.test")
    q.add_ar(EDNS0(udp_len=1232, flags="do", opts=[EDNSOption(65001, b"\x01\x02\x03")]))
    q.ar[0].ttl |= 0x0001  # an unknown flag bit in the OPT "Z" field
    reply = DNSRecord.parse(udp_raw(server.port, q.pack()))
    assert reply.header.rcode == RCODE.NOERROR
    assert str(reply.rr[0].rdata) == "192.0.2.25"
    opt = opt_of(reply)
    assert opt.ttl & 0x8000  # DO copied
    assert not opt.rdata  # unknown option not echoed


def test_several_opt_records_are_formerr(server) -> None:
    q = make_query("mail.example.test")
    q.add_ar(EDNS0(udp_len=1232))
    q.add_ar(EDNS0(udp_len=1232))
    reply = DNSRecord.parse(udp_raw(server.port, q.pack()))
    assert reply.header.rcode == RCODE.FORMERR


# -- truncation ----------------------------------------------------------------------------
def test_udp_reply_over_512_without_edns_is_truncated(server) -> None:
    raw = udp_raw(server.port, make_query("big.example.test", "TXT").pack())
    assert raw is not None and len(raw) <= 512
    reply = DNSRecord.parse(raw)
    assert reply.header.tc == 1 and not reply.rr
    assert str(reply.q.qname) == "big.example.test."


def test_udp_reply_fits_the_edns_payload(server) -> None:
    raw = udp_raw(
        server.port, make_query("big.example.test", "TXT", edns=True, payload=1232).pack()
    )
    reply = DNSRecord.parse(raw)
    assert reply.header.tc == 0 and len(reply.rr) == 6 and len(raw) > 512


def test_small_edns_payload_is_treated_as_512(server) -> None:
    raw = udp_raw(server.port, make_query("big.example.test", "TXT", edns=True, payload=100).pack())
    reply = DNSRecord.parse(raw)
    assert reply.header.tc == 1 and len(raw) <= 512


def test_tcp_carries_the_full_answer(server) -> None:
    reply = ask(server.port, "big.example.test", "TXT", tcp=True)
    assert reply.header.tc == 0 and len(reply.rr) == 6


# -- opcodes, counts, classes --------------------------------------------------------------
@pytest.mark.parametrize("opcode", [OPCODE.IQUERY, OPCODE.STATUS, OPCODE.NOTIFY])
def test_other_opcodes_are_notimp(server, opcode: int) -> None:
    q = make_query("mail.example.test")
    q.header.opcode = opcode
    reply = DNSRecord.parse(udp_raw(server.port, q.pack()))
    assert reply.header.rcode == RCODE.NOTIMP
    assert reply.header.opcode == opcode and reply.header.qr == 1


def test_an_unsigned_update_is_refused(server) -> None:
    """RFC 2136 UPDATE without TSIG (docs/dynamic-update.md): REFUSED, nothing changes."""
    q = make_query("example.test", "SOA")
    q.header.opcode = OPCODE.UPDATE
    reply = DNSRecord.parse(udp_raw(server.port, q.pack()))
    assert reply.header.rcode == RCODE.REFUSED
    assert reply.header.opcode == OPCODE.UPDATE and reply.header.qr == 1
    still_answers(server.port)


def test_qdcount_zero_is_formerr(server) -> None:
    wire = struct.pack("!HHHHHH", 0x1234, 0x0100, 0, 0, 0, 0)
    reply = DNSRecord.parse(udp_raw(server.port, wire))
    assert reply.header.id == 0x1234 and reply.header.rcode == RCODE.FORMERR
    still_answers(server.port)


def test_qdcount_two_is_formerr(server) -> None:
    q = make_query("mail.example.test")
    q.add_question(make_query("www.example.test").q)
    reply = DNSRecord.parse(udp_raw(server.port, q.pack()))
    assert reply.header.rcode == RCODE.FORMERR


def test_class_chaos_is_refused(server) -> None:
    q = make_query("version.bind", "TXT")
    q.q.qclass = 3
    reply = DNSRecord.parse(udp_raw(server.port, q.pack()))
    assert reply.header.rcode == RCODE.REFUSED


# -- malformed packets: each followed by a check that the server still answers ------------
HEADER = struct.pack("!HHHHHH", 0xABCD, 0x0100, 1, 0, 0, 0)
MALFORMED_WITH_HEADER = {
    "compression-pointer-loop": HEADER + b"\xc0\x0c\x00\x01\x00\x01",
    "label-length-past-end": HEADER + b"\x3fabc",
    "label-type-0x40": HEADER + b"\x40" + b"a" * 64 + b"\x00\x00\x01\x00\x01",
    "label-type-0x80": HEADER + b"\x80abc\x00\x00\x01\x00\x01",
    "question-without-type": HEADER + b"\x04mail\x07example\x04test\x00",
    "no-question-body": HEADER,
    "answer-count-lies": struct.pack("!HHHHHH", 0xABCD, 0x0100, 1, 5, 0, 0)
    + b"\x04mail\x07example\x04test\x00\x00\x01\x00\x01",
    "name-over-255": HEADER + (b"\x3f" + b"a" * 63) * 4 + b"\x00\x00\x01\x00\x01",
}


@pytest.mark.parametrize("tcp", [False, True])
@pytest.mark.parametrize("name", sorted(MALFORMED_WITH_HEADER))
def test_malformed_packet_with_header_is_formerr(server, name: str, tcp: bool) -> None:
    wire = MALFORMED_WITH_HEADER[name]
    raw = tcp_raw(server.port, wire) if tcp else udp_raw(server.port, wire)
    assert raw is not None
    reply = DNSRecord.parse(raw)
    assert reply.header.id == 0xABCD and reply.header.qr == 1
    assert reply.header.rcode == RCODE.FORMERR
    still_answers(server.port)


@pytest.mark.parametrize("wire", [b"", b"\x00", b"\x12\x34\x01\x00\x00", b"x" * 11])
def test_truncated_header_is_dropped(server, wire: bytes) -> None:
    assert udp_raw(server.port, wire, timeout=0.3) is None
    still_answers(server.port)


def test_responses_sent_to_the_server_are_dropped(server) -> None:
    q = make_query("mail.example.test")
    q.header.qr = 1
    assert udp_raw(server.port, q.pack(), timeout=0.3) is None
    still_answers(server.port)


def test_random_bytes_never_kill_the_server(server) -> None:
    rng = random.Random(20261130)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.05)
        for _ in range(300):
            s.sendto(rng.randbytes(rng.randrange(0, 200)), ("127.0.0.1", server.port))
            try:
                raw = s.recv(65535)
            except TimeoutError:
                continue
            assert len(raw) >= 12 and raw[2] & 0x80  # whatever comes back is a DNS response
    still_answers(server.port)


# -- TCP (RFC 7766) ------------------------------------------------------------------------
def test_tcp_pipelined_queries_are_all_answered_in_order(server) -> None:
    names = [
        "mail.example.test",
        "short.example.test",
        "www.child.example.test",
        "nope.example.org",
    ]
    frames = b""
    for i, name in enumerate(names):
        q = make_query(name)
        q.header.id = 100 + i
        wire = q.pack()
        frames += struct.pack("!H", len(wire)) + wire
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as s:
        s.sendall(frames)
        replies = [DNSRecord.parse(read_frame(s)) for _ in names]
    assert [r.header.id for r in replies] == [100, 101, 102, 103]
    assert [str(r.q.qname) for r in replies] == [n + "." for n in names]
    assert RCODE.get(replies[-1].header.rcode) == "REFUSED"


def test_stalled_tcp_client_does_not_block_others(server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as stalled:
        stalled.sendall(b"\x00")  # half a length prefix, then nothing
        started = time.monotonic()
        still_answers(server.port)
        assert ask(server.port, "mail.example.test", tcp=True).rr
        assert time.monotonic() - started < 1.0


@pytest.fixture
def strict_server():
    limits = TcpLimits(max_connections=3, idle_timeout_s=0.5, read_timeout_s=0.3)
    srv = ServerThread(DATA / "good", tcp_limits=limits).start()
    yield srv
    srv.stop()


def closed_within(s: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closes `s`, or None if it stays open that long."""
    started = time.monotonic()
    s.settimeout(seconds)
    try:
        data = s.recv(1)
    except TimeoutError:
        return None
    except ConnectionResetError:
        data = b""
    return time.monotonic() - started if data == b"" else None


def test_idle_tcp_connection_is_closed(strict_server) -> None:
    with socket.create_connection(("127.0.0.1", strict_server.port)) as s:
        took = closed_within(s, 3.0)
    assert took is not None and 0.3 <= took < 2.0


def test_half_sent_length_prefix_is_cut_at_the_read_timeout(strict_server) -> None:
    with socket.create_connection(("127.0.0.1", strict_server.port)) as s:
        s.sendall(b"\x00")
        took = closed_within(s, 3.0)
    assert took is not None and took < 0.45 + 0.5  # read timeout 0.3 s, well below idle + slack


def test_connection_cap_closes_the_longest_idle_connection_for_a_new_one(strict_server) -> None:
    """RFC 7766 §6.2.3: at the cap, the connection idle the longest makes room."""
    held = [socket.create_connection(("127.0.0.1", strict_server.port)) for _ in range(3)]
    try:
        until(lambda: strict_server.server.counters.tcp_connections >= 3, 5.0, "3 taken")
        with socket.create_connection(("127.0.0.1", strict_server.port)) as extra:
            wire = make_query("mail.example.test").pack()
            extra.sendall(struct.pack("!H", len(wire)) + wire)
            assert DNSRecord.parse(read_frame(extra)).rr  # the new client is served
            assert closed_within(held[0], 0.2) is not None  # the oldest idle one was closed
            assert closed_within(held[2], 0.05) is None  # the others stay
        still_answers(strict_server.port)  # UDP unaffected
        assert strict_server.server.counters.tcp_evicted == 1
    finally:
        for s in held:
            s.close()


def test_connection_cap_refuses_while_every_connection_is_busy(strict_server) -> None:
    held = [socket.create_connection(("127.0.0.1", strict_server.port)) for _ in range(3)]
    try:
        for s in held:
            s.sendall(b"\x00\x20\x12")  # the start of a query: busy until the read timeout
        until(lambda: strict_server.server.counters.tcp_connections >= 3, 5.0, "3 taken")
        real_time_passes(0.05, "their first bytes read")
        with socket.create_connection(("127.0.0.1", strict_server.port)) as extra:
            took = closed_within(extra, 0.2)
            assert took is not None and took < 0.15  # refused at once, not a timeout
        still_answers(strict_server.port)
    finally:
        for s in held:
            s.close()
    until(lambda: answers_over_tcp(strict_server.port), 5.0, "a place free again")


def answers_over_tcp(port: int) -> bool:
    try:
        return bool(ask(port, "mail.example.test", tcp=True).rr)
    except OSError:
        return False


def test_ipv6_listener(tmp_path) -> None:
    from dnsd.loading import load_snapshot
    from dnsd.server import DnsServer, ServerOptions

    srv = ServerThread(DATA / "good")
    srv.server = DnsServer(
        ServerOptions(config_dir=DATA / "good", listen=(("::1", 0),)),
        load_snapshot(DATA / "good", 1),
    )
    srv.start()
    try:
        raw = udp_raw(srv.port, make_query("mail.example.test", "AAAA").pack(), host="::1")
        assert str(DNSRecord.parse(raw).rr[0].rdata) == "2001:db8::25"
        raw = tcp_raw(srv.port, make_query("mail.example.test", "AAAA").pack(), host="::1")
        assert str(DNSRecord.parse(raw).rr[0].rdata) == "2001:db8::25"
    finally:
        srv.stop()
