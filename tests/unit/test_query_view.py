"""The query view (dnsd.query_view): one parse of header, question and OPT; malformation
as a value; and the same reading of every query dnslib writes (Hypothesis)."""

from __future__ import annotations

import struct

import pytest
from dnslib import EDNS0, RR, DNSRecord, EDNSOption
from hypothesis import given, settings
from hypothesis import strategies as st

from dnsd.dnsname import wire_labels
from dnsd.query_view import view_of

COOKIE = bytes(range(8))


def query(*options: tuple[int, bytes], flags: str = "", version: int = 0) -> bytes:
    q = DNSRecord.question("www.Example.test", "AAAA")
    q.add_ar(EDNS0(udp_len=4096, flags=flags, version=version,
                   opts=[EDNSOption(c, d) for c, d in options]))  # fmt: skip
    return bytes(q.pack())


def test_the_header_question_and_opt_of_a_usual_query() -> None:
    wire = query((10, COOKIE), (8, b"\x00\x01\x18\x00\xc0\x00\x02"), flags="do")
    view = view_of(wire)
    assert view is not None and view.usual
    assert view.ident == struct.unpack_from("!H", wire)[0] and view.opcode == 0
    assert view.qname == b"\x03www\x07Example\x04test\x00" and (view.qtype, view.qclass) == (28, 1)
    assert view.end == 12 + len(view.qname) + 4
    assert view.edns is not None and not view.edns_error
    assert view.edns.payload == 4096 and view.edns.do and not view.edns.co
    assert view.edns.cookie == (COOKIE, b"")
    assert view.edns.ecs is not None and str(view.edns.ecs.address) == "192.0.2.0"
    assert view.opts[0].options[0] == (10, COOKIE)


@pytest.mark.parametrize(
    "wire",
    [
        query((10, b"")),  # an empty COOKIE (RFC 7873 §5.2.2), even last
        query((10, COOKIE), (10, COOKIE)),  # two cookies
        query((8, b"\x00\x01\x18\x00"), (8, b"\x00\x01\x18\x00")),  # two ECS options
        query((8, b"\x00\x01\x18\x01\xc0\x00\x02")),  # ECS with a scope in a query
        query((8, b""), (10, COOKIE)),  # an empty ECS before another option
        query((10, b"\x00" * 9)),  # a COOKIE of 9 bytes
    ],
    ids=["empty-cookie", "two-cookies", "two-ecs", "ecs-scope", "empty-ecs", "cookie-9"],
)
def test_a_malformed_option_is_a_formerr_value(wire: bytes) -> None:
    view = view_of(wire)
    assert view is not None and view.edns_error and view.edns is None
    assert not view.usual


def test_several_opts_an_option_past_its_rdata_and_a_named_owner_are_formerr() -> None:
    q = DNSRecord.question("a.test")
    q.add_ar(EDNS0())
    q.add_ar(EDNS0())
    assert view_of(bytes(q.pack())).edns_error  # type: ignore[union-attr]
    wire = bytearray(query((3, b"abcd")))
    wire[-5] = 9  # the option's length runs past the OPT record
    assert view_of(bytes(wire)).edns_error  # type: ignore[union-attr]
    named = DNSRecord.question("a.test")
    named.add_ar(RR("x.test", 41, rclass=1232, rdata=[]))  # type: ignore[arg-type]
    assert view_of(bytes(named.pack())).edns_error  # type: ignore[union-attr]


def test_an_empty_option_last_is_absent_and_a_newer_version_is_not_usual() -> None:
    wire = query((8, b""))  # answered as if it were not there, as it always was
    view = view_of(wire)
    assert view is not None and not view.edns_error and view.edns is not None
    assert view.edns.ecs is None
    badvers = query(version=1)
    view = view_of(badvers)
    assert view is not None and view.opts[0].version == 1 and not view.usual


def test_short_compressed_and_questionless_queries() -> None:
    assert view_of(b"\x00" * 11) is None
    header = struct.pack("!6H", 7, 0, 0, 0, 0, 0)
    view = view_of(header)
    assert view is not None and view.qname is None and view.end == 12
    compressed = struct.pack("!6H", 7, 0, 1, 0, 0, 0) + b"\xc0\x0c\x00\x01\x00\x01"
    view = view_of(compressed)
    assert view is not None and view.qname is None and view.qtype == 1
    cut = bytes(DNSRecord.question("a.test").pack())[:-2]
    view = view_of(cut)
    assert view is not None and view.records_end is None and not view.usual


names = st.lists(st.from_regex(r"[A-Za-z0-9-]{1,20}", fullmatch=True), min_size=1, max_size=6)
options = st.lists(
    st.tuples(st.sampled_from([3, 9, 12, 65001]), st.binary(min_size=1, max_size=12)), max_size=3
)


@settings(max_examples=300, deadline=None)
@given(names, st.integers(1, 65535), options, st.integers(0, 65535), st.booleans(), st.booleans())
def test_it_reads_what_dnslib_reads(labels, qtype, opts, payload, do, with_opt) -> None:
    q = DNSRecord.question(".".join(labels), "A")
    q.q.qtype = qtype
    if with_opt:
        q.add_ar(EDNS0(udp_len=payload, flags="do" if do else "",
                       opts=[EDNSOption(c, d) for c, d in opts]))  # fmt: skip
    wire = bytes(q.pack())
    view = view_of(wire)
    parsed = DNSRecord.parse(wire)
    assert view is not None and view.usual
    assert view.qname is not None and wire_labels(view.qname) == list(parsed.q.qname.label)
    assert (view.qtype, view.qclass) == (parsed.q.qtype, parsed.q.qclass)
    if not with_opt:
        assert view.edns is None and not view.opts
        return
    [opt] = [rr for rr in parsed.ar if rr.rtype == 41]
    assert view.edns is not None and view.edns.payload == max(512, opt.rclass)
    assert view.edns.do == do
    assert view.opts[0].options == tuple((o.code, o.data) for o in opt.rdata)
