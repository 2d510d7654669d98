"""Fuzzing the query path that serves: random and mutated packets go
through the answer cache (its parser, memo and templates) as `dnsd serve` runs it, never
raise, get exactly the full path's reply for the same random source, and each gets a
well-formed reply within the UDP size limit that applies, or a deliberate drop (only for
< 12 bytes or a response packet)."""

from __future__ import annotations

import ipaddress
import random
import struct

from dnslib import EDNS0, DNSRecord, EDNSOption
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnsd.fastpath import AnswerCache
from dnsd.health.view import HealthView
from dnsd.loading import load_snapshot
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import resolve
from tests.conftest import DATA, GEO
from tests.tiers import examples

SNAP = load_snapshot(DATA / "good", 1, GEO)
CLIENT = Client(ipaddress.ip_address("81.2.69.142"), "udp")
HEALTH = HealthView()
CACHE = AnswerCache()  # one cache across examples: later ones meet memos of earlier ones
SEEDS = [
    DNSRecord.question("www.example.test").pack(),
    DNSRecord.question("big.example.test", "TXT").pack(),
    DNSRecord.question("docs.example.test", "ANY").pack(),
]
q = DNSRecord.question("www.example.test")
q.add_ar(EDNS0(udp_len=4096, opts=[EDNSOption(8, b"\x00\x01\x18\x00\x51\x02\x45")]))
SEEDS.append(q.pack())


def udp_limit(wire: bytes) -> int:
    """RFC 6891: 512 bytes without EDNS, else the client's payload size (at least 512),
    capped at the 1232 dnsd advertises."""
    try:
        query = DNSRecord.parse(wire)
    except Exception:
        return 512  # a query that does not parse gets a header-only reply
    opts = [rr for rr in query.ar if rr.rtype == 41]
    return min(max(512, opts[0].rclass), 1232) if len(opts) == 1 else 512


def check(wire: bytes) -> None:
    reply = CACHE.answer(wire, CLIENT, SNAP, HEALTH, random.Random(1), 0.0)
    assert reply == resolve(Request(wire, CLIENT, SNAP, HEALTH, random.Random(1), 0.0))
    if reply is None:
        assert len(wire) < 12 or wire[2] & 0x80  # drops are only for these
        return
    assert len(reply) >= 12 and reply[2] & 0x80  # a response
    assert reply[:2] == wire[:2]  # with the query's ID
    assert len(reply) <= udp_limit(wire), (len(reply), udp_limit(wire))
    DNSRecord.parse(reply)  # and it parses


@settings(
    max_examples=examples(1500),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.binary(min_size=0, max_size=300))
def test_random_bytes(wire: bytes) -> None:
    check(wire)


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "count"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 4))]
        elif kind == "truncate":
            del data[pos:]
        elif kind == "count" and len(data) >= 12:
            struct.pack_into(
                "!H", data, draw(st.sampled_from([4, 6, 8, 10])), draw(st.integers(0, 65535))
            )
    return bytes(data)


@settings(
    max_examples=examples(3000),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutated())
def test_mutated_queries(wire: bytes) -> None:
    check(wire)
