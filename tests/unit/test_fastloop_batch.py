"""The compiled loop's batch over a real UDP socket: it answers from answer tables alone
(the ID written in, the table's counters bumped), reports a table it cannot read as a
counted FALLBACK for the Python path, raises the errors it meets instead of clearing
them, and keeps dnstap frames of its answers (sampled, bounded, counted)."""

from __future__ import annotations

import random
import socket
import struct
import time
from array import array

import dnstap_pb
import pytest

import dnsd._fastloop as fastloop
from dnsd import answer_table
from dnsd.answer_table import FALLBACK, Finished
from dnsd.net.dnstap import DnstapSettings, DnstapWriter, server_address
from dnsd.steering.draws import Draw, Outcome

NO_TABLE = 5  # dnsd/_fastloop.c: no table for the query


def received(batch: fastloop.Batch, client: socket.socket, server: socket.socket,
             queries: list[bytes]) -> None:  # fmt: skip
    for query in queries:
        client.sendto(query, server.getsockname())
    time.sleep(0.05)  # all of them queued: one receive takes the batch
    assert batch.receive() == len(queries)


def test_tables_answered_unreadable_ones_counted(pair) -> None:
    server, client = pair
    batch = fastloop.Batch(server.fileno(), True, 8)
    static, garbled, unknown = (
        b"\x12\x34" + body for body in (b"static-query", b"garbled-query", b"no-table-at-all")
    )
    counters = array("q", [0] * 4)
    tables = {
        static[2:]: answer_table.static_table(b"\x81\x80static-reply", 2),
        garbled[2:]: b"dnsT\x09\x00 not a table of this version",
    }
    received(batch, client, server, [static, garbled, unknown])
    misses, answered, fallbacks = batch.answer_hits(tables, random.Random(1), counters, None, {})
    assert (answered, fallbacks) == (1, 1)
    assert sorted(code for _, (code, _, _) in misses) == [FALLBACK, NO_TABLE]
    assert list(counters) == [0, 0, 1, 0]  # the reply counter the table names
    assert batch.flush() == 0
    assert client.recv(512) == b"\x12\x34\x81\x80static-reply"


def test_errors_are_raised_not_cleared(pair) -> None:
    server, client = pair
    batch = fastloop.Batch(server.fileno(), True, 8)
    a, b = (Outcome((address,), None, "p", False, 0, ()) for address in ("192.0.2.1", "b"))
    tree = Draw(2.0, (1.0,), (a, b), "pool")
    table = answer_table.build(tree, {a: Finished(b"a" * 12, 0), b: Finished(b"b" * 12, 0)},
                               b"", 1).table  # fmt: skip
    query = b"\x00\x01draws-in-this-query"

    class Failing:
        def random(self) -> float:
            raise ZeroDivisionError("the random source failed")

    received(batch, client, server, [query])
    with pytest.raises(ZeroDivisionError):
        batch.answer_hits({query[2:]: table}, Failing(), array("q", [0]), None, {})
    with pytest.raises(TypeError):  # counters of another width: refused, not misread
        batch.answer_hits({query[2:]: table}, random.Random(1), array("i", [0]), None, {})

    def limiter(reply: bytes, who: object, wire: bytes) -> bytes | None:
        raise KeyError("the rate limiter failed")

    with pytest.raises(KeyError):
        batch.answer_hits({query[2:]: table}, random.Random(1), array("q", [0]), limiter,
                          {int.from_bytes(socket.inet_aton("127.0.0.1"), "little"): "c"})  # fmt: skip


def tapped_frames(data: bytes) -> list[dnstap_pb.Dnstap]:
    """The dnstap messages of take_taps' frames (a length before each)."""
    out, i = [], 0
    while i < len(data):
        (length,) = struct.unpack_from("!I", data, i)
        tap = dnstap_pb.Dnstap()
        tap.ParseFromString(data[i + 4 : i + 4 + length])
        out.append(tap)
        i += 4 + length
    assert i == len(data)
    return out


def test_taps_hold_every_field_and_the_decision(pair) -> None:
    """dnstap: each answer given in C becomes an AUTH_QUERY and an AUTH_RESPONSE frame the
    protobuf library decodes, with the addresses, ports, times, both messages and, for a
    load-balanced answer, the policy the writer encoded for the counter its leaf names."""
    server, client = pair
    writer = DnstapWriter(DnstapSettings(identity="ns-unit"))
    batch = fastloop.Batch(server.fileno(), True, 8)
    server_port = server.getsockname()[1]
    batch.tap(*writer.frame_parts(), server_address("127.0.0.1"), server_port, 1, 3, 1 << 16)
    plain, balanced = b"\x00\x07plain-query", b"\x00\x08balanced-query"
    a = Outcome(("192.0.2.1",), None, "eu", False, 0, ())
    lb_table = answer_table.build(a, {a: Finished(b"\x81\x80lb-reply", 0, 1)}, b"", 1).table
    tables = {
        plain[2:]: answer_table.static_table(b"\x81\x80plain-reply", 0),
        balanced[2:]: lb_table,
    }
    policies = [b"", writer.policy_field(("web", "eu", "WEU"))]
    began = time.time()
    received(batch, client, server, [plain, balanced])
    _, answered, _ = batch.answer_hits(
        tables, random.Random(1), array("q", [0, 0]), None, {}, None, policies
    )
    assert answered == 2
    data, count = batch.take_taps()
    assert count == 4 and batch.take_taps() == (b"", 0)
    taps = tapped_frames(data)
    assert [t.message.type for t in taps] == [1, 2, 1, 2]  # AUTH_QUERY, AUTH_RESPONSE
    assert taps[0].message.query_message == plain
    assert taps[1].message.response_message == b"\x00\x07\x81\x80plain-reply"
    assert taps[3].message.response_message == b"\x00\x08\x81\x80lb-reply"
    loopback = socket.inet_aton("127.0.0.1")
    for tap in taps:
        assert (tap.identity, tap.version, tap.type) == (b"ns-unit", b"dnsd", tap.MESSAGE)
        m = tap.message
        assert (m.socket_family, m.socket_protocol) == (dnstap_pb.INET, dnstap_pb.UDP)
        assert (m.query_address, m.query_port) == (loopback, client.getsockname()[1])
        assert (m.response_address, m.response_port) == (loopback, server_port)
        assert began - 1 < m.query_time_sec + m.query_time_nsec / 1e9 <= time.time()
    assert not taps[1].message.HasField("policy")
    policy = taps[3].message.policy
    assert (policy.type, policy.rule, policy.value) == ("dnsd", b"web -> eu", b"WEU")
    assert (taps[3].message.response_time_sec, taps[3].message.response_time_nsec) >= (
        taps[3].message.query_time_sec,
        taps[3].message.query_time_nsec,
    )


def test_taps_sampled_and_bounded(pair) -> None:
    """One answer in `every` is kept; what the buffer cannot hold is dropped and counted,
    a query's two frames together."""
    server, client = pair
    batch = fastloop.Batch(server.fileno(), True, 8)
    batch.tap(b"", b"", b"", 0, 2, 3, 1 << 16)
    query = b"\x00\x01big-reply-query"
    tables = {query[2:]: answer_table.static_table(b"\x81\x80" + b"r" * 3000, 0)}
    for _ in range(8):  # 64 answers, 32 of them kept: about 20 fit
        received(batch, client, server, [query] * 8)
        batch.answer_hits(tables, random.Random(1), array("q", [0]), None, {})
        assert batch.flush() == 0
        for _ in range(8):
            client.recv(4096)
    data, count = batch.take_taps()
    kept = len(tapped_frames(data)) // 2
    assert count == 2 * kept and 10 < kept < 32
    assert batch.tap_dropped == 32 - kept
