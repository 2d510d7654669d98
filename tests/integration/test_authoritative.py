"""Authoritative answers over real UDP and TCP sockets.

Each case is (query name, type) → rcode, AA, answer records, authority and additional
records, rendered as "owner ttl TYPE rdata" strings so a failure reads like dig output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from dnslib import QTYPE, RCODE, DNSRecord

from tests.dnsclient import ask

SOA_EXAMPLE = (
    "example.test. 300 SOA ns1.example.test. hostmaster.example.test. "
    "2026113001 7200 900 1209600 300"
)
SOA_CHILD = (
    "child.example.test. 60 SOA ns1.example.test. hostmaster.example.test. 7 7200 900 1209600 60"
)


@dataclass
class Case:
    name: str
    qtype: str
    rcode: str = "NOERROR"
    aa: bool = True
    answer: list[str] = field(default_factory=list)
    authority: list[str] = field(default_factory=list)
    additional: list[str] = field(default_factory=list)


def render(rrs: list) -> list[str]:
    return [f"{rr.rname} {rr.ttl} {QTYPE.get(rr.rtype)} {rr.rdata.toZone()}" for rr in rrs]


CASES = [
    # ensure plain static answers carry AA and the record TTL
    Case("mail.example.test", "A", answer=["mail.example.test. 3600 A 192.0.2.25"]),
    Case("mail.example.test", "AAAA", answer=["mail.example.test. 3600 AAAA 2001:db8::25"]),
    Case("short.example.test", "A", answer=["short.example.test. 5 A 192.0.2.44"]),
    Case("example.test", "SOA", answer=[SOA_EXAMPLE.replace(" 300 SOA", " 3600 SOA")]),
    Case(
        "example.test",
        "MX",
        answer=["example.test. 3600 MX 10 mail.example.test."],
        additional=[
            "mail.example.test. 3600 A 192.0.2.25",
            "mail.example.test. 3600 AAAA 2001:db8::25",
        ],
    ),
    Case("example.test", "TXT", answer=['example.test. 3600 TXT "v=spf1 -all"']),
    Case("example.test", "CAA", answer=['example.test. 3600 CAA 0 issue "letsencrypt.org"']),
    Case(
        "_sip._tcp.example.test",
        "SRV",
        answer=["_sip._tcp.example.test. 3600 SRV 10 5 5060 sip.example.test."],
    ),
    # ensure NODATA (name exists, type does not) has the SOA with TTL min(SOA TTL, minimum)
    Case("mail.example.test", "TXT", authority=[SOA_EXAMPLE]),
    # ensure an empty non-terminal is NODATA and blocks the apex wildcard (RFC 4592 §2.2.2)
    Case("_tcp.example.test", "TXT", authority=[SOA_EXAMPLE]),
    Case("apps.example.test", "A", authority=[SOA_EXAMPLE]),
    # ensure NXDOMAIN below an existing name without a wildcard of its own
    Case("x.mail.example.test", "A", rcode="NXDOMAIN", authority=[SOA_EXAMPLE]),
    # ensure wildcard synthesis uses the query name as owner, from the closest encloser
    Case("foo.apps.example.test", "A", answer=["foo.apps.example.test. 3600 A 192.0.2.99"]),
    Case("a.b.apps.example.test", "A", answer=["a.b.apps.example.test. 3600 A 192.0.2.99"]),
    Case(
        "nothing-here.example.test",
        "TXT",
        answer=['nothing-here.example.test. 3600 TXT "wildcard at the apex"'],
    ),
    Case("nothing-here.example.test", "A", authority=[SOA_EXAMPLE]),
    # ensure CNAME chains are followed inside the zone, and the last name sets the rcode
    Case("docs.example.test", "CNAME", answer=["docs.example.test. 3600 CNAME www.example.test."]),
    Case(
        "gone.example.test",
        "A",
        rcode="NXDOMAIN",
        answer=["gone.example.test. 3600 CNAME nothere.mail.example.test."],
        authority=[SOA_EXAMPLE],
    ),
    Case(
        "loop1.example.test",
        "A",
        answer=[
            "loop1.example.test. 3600 CNAME loop2.example.test.",
            "loop2.example.test. 3600 CNAME loop1.example.test.",
        ],
    ),
    Case("away.example.test", "A", answer=["away.example.test. 3600 CNAME www.example.org."]),
    # ensure a delegation answers with a referral: NS in authority, glue, AA clear
    Case(
        "host.sub.example.test",
        "A",
        aa=False,
        authority=["sub.example.test. 3600 NS ns.sub.example.test."],
        additional=["ns.sub.example.test. 3600 A 192.0.2.100"],
    ),
    Case(
        "ns.sub.example.test",
        "A",
        aa=False,
        authority=["sub.example.test. 3600 NS ns.sub.example.test."],
        additional=["ns.sub.example.test. 3600 A 192.0.2.100"],
    ),
    Case("sub.example.test", "DS", authority=[SOA_EXAMPLE]),
    # ensure the longest matching zone answers
    Case("www.child.example.test", "A", answer=["www.child.example.test. 600 A 192.0.2.77"]),
    Case("nope.child.example.test", "A", rcode="NXDOMAIN", authority=[SOA_CHILD]),
    # ensure names outside every zone are refused, without AA
    Case("www.example.org", "A", rcode="REFUSED", aa=False),
    Case("test", "SOA", rcode="REFUSED", aa=False),
    # ensure ANY gets one RRset (RFC 8482), never the whole name
    Case(
        "mail.example.test",
        "ANY",
        answer=["mail.example.test. 3600 A 192.0.2.25"],
    ),
    # ensure zone transfers are refused
    Case("example.test", "AXFR", rcode="REFUSED", aa=False),
]


@pytest.mark.parametrize("transport", ["udp", "tcp"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.name}/{c.qtype}")
def test_answer(server, case: Case, transport: str) -> None:
    reply = ask(server.port, case.name, case.qtype, tcp=transport == "tcp")
    assert RCODE.get(reply.header.rcode) == case.rcode
    assert bool(reply.header.aa) == case.aa
    assert render(reply.rr) == case.answer
    assert render(reply.auth) == case.authority
    assert render([rr for rr in reply.ar if rr.rtype != QTYPE.OPT]) == case.additional


def test_load_balanced_name_answers_from_a_pool(server) -> None:
    reply = ask(server.port, "www.example.test", "A")
    assert reply.header.aa == 1
    assert [(rr.ttl, QTYPE.get(rr.rtype)) for rr in reply.rr] == [(30, "A")]
    assert str(reply.rr[0].rdata) in {"192.0.2.10", "192.0.2.11", "192.0.2.12"}


def test_cname_chain_ends_in_a_load_balanced_name(server) -> None:
    reply = ask(server.port, "chain.example.test", "A")
    owners = [(str(rr.rname), QTYPE.get(rr.rtype)) for rr in reply.rr]
    assert owners == [
        ("chain.example.test.", "CNAME"),
        ("docs.example.test.", "CNAME"),
        ("www.example.test.", "A"),
    ]


def test_load_balanced_name_without_backends_of_the_family_is_nodata(server) -> None:
    reply = ask(server.port, "api.example.test", "TXT")
    assert reply.header.rcode == RCODE.NOERROR and not reply.rr
    assert render(reply.auth) == [SOA_EXAMPLE]


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_header_flags_and_case(server, transport: str) -> None:
    for rd in (True, False):
        reply = ask(server.port, "MaIl.ExAmPlE.TeSt", "A", tcp=transport == "tcp", rd=rd)
        assert reply.header.qr == 1
        assert reply.header.ra == 0  # authoritative only: recursion never available
        assert reply.header.rd == int(rd)  # RD copied from the query
        assert str(reply.q.qname) == "MaIl.ExAmPlE.TeSt."  # 0x20 case preserved
        assert str(reply.rr[0].rname) == "MaIl.ExAmPlE.TeSt."


def test_reply_id_matches_query(server) -> None:
    from tests.dnsclient import make_query, udp_raw

    for ident in (0, 1, 0xBEEF, 0xFFFF):
        q = make_query("mail.example.test")
        q.header.id = ident
        raw = udp_raw(server.port, q.pack())
        assert raw is not None and DNSRecord.parse(raw).header.id == ident
