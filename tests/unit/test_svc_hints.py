"""HTTPS and SVCB at a load-balanced name (docs/steering.md): the records' ipv4hint is the
A answer the same random numbers give, the ipv6hint the AAAA addresses of the same pools;
AliasMode and records naming another target are served as written; the TTL is the load
balancer's."""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path

import dns.message
import dns.rdatatype
import pytest
from dns.rdtypes.svcbbase import ParamKey
from dnslib import DNSRecord

from dnsd.config.loader import check_directory, load_config
from dnsd.health.view import view_of
from dnsd.rdata import from_text, to_wire, with_hints
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import resolve
from dnsd.snapshot import compile_snapshot

ZONE = """\
zone: svc.test
soa: {mname: ns1.svc.test., rname: h.svc.test.}
ttl: 3600
records:
  "@": {NS: ns1.svc.test.}
  ns1: {A: 192.0.2.1}
  www:
    lb: web
    HTTPS: ["1 . alpn=h2,h3 ipv4hint=203.0.113.99", "2 alt.svc.test. alpn=h2 ipv4hint=203.0.113.98"]
    SVCB: "1 . port=8443"
  alias: {lb: web, HTTPS: "0 www.svc.test."}
  two: {lb: two, HTTPS: "1 . alpn=h2"}
  every: {lb: every, HTTPS: "1 . alpn=h2"}
pools:
  a:
    region: ENAM
    backends:
      - {name: a1, address: 192.0.2.10}
      - {name: a2, address: 192.0.2.11}
      - {name: a6, address: "2001:db8::a"}
  b:
    region: WEU
    backends: [{name: b1, address: 198.51.100.10}, {name: b6, address: "2001:db8::b"}]
  c:
    region: NEAS
    backends: [{name: c1, address: 203.0.113.10}]
load_balancers:
  web: {ttl: 7, steering: random, default_pools: [a, b, c]}
  two: {ttl: 7, default_pools: [a, b, c], answer_pools: 2, distinct: region}
  every: {ttl: 7, default_pools: [c], fallback_pool: b, when_all_down: all}
"""
CLIENT = Client(ipaddress.ip_address("127.0.0.1"), "udp")
POOL_OF = {
    "192.0.2.10": "a",
    "192.0.2.11": "a",
    "2001:db8::a": "a",
    "198.51.100.10": "b",
    "2001:db8::b": "b",
    "203.0.113.10": "c",
}


def hint_text(rtype: str, text: str, v4: tuple[str, ...], v6: tuple[str, ...]) -> str:
    number = int(dns.rdatatype.from_text(rtype))
    wire = with_hints(number, to_wire(from_text(number, text, "svc.test.")), v4, v6)
    return str(dns.rdata.from_wire("IN", number, wire, 0, len(wire)))


@pytest.mark.parametrize(
    ("text", "v4", "v6", "expected"),
    [
        ("1 . alpn=h2", ("192.0.2.1",), (), '1 . alpn="h2" ipv4hint="192.0.2.1"'),
        (
            "1 . alpn=h2 ipv4hint=9.9.9.9 ipv6hint=::9",
            ("192.0.2.1", "192.0.2.2"),
            ("::1",),
            '1 . alpn="h2" ipv4hint="192.0.2.1,192.0.2.2" ipv6hint="::1"',
        ),
        # no address of a family: its hint goes
        ("1 . ipv4hint=9.9.9.9 ipv6hint=::9", (), ("::1",), '1 . ipv6hint="::1"'),
        ("1 . ipv4hint=9.9.9.9", (), (), "1 ."),
        # AliasMode, or another target (its own addresses): as written
        ("0 other.svc.test.", ("192.0.2.1",), (), "0 other.svc.test."),
        (
            "1 alt.svc.test. ipv4hint=9.9.9.9",
            ("192.0.2.1",),
            (),
            '1 alt.svc.test. ipv4hint="9.9.9.9"',
        ),
        # a mandatory hint that would go: the record as written, never an invalid one
        (
            "1 . mandatory=ipv4hint ipv4hint=9.9.9.9",
            (),
            (),
            '1 . mandatory="ipv4hint" ipv4hint="9.9.9.9"',
        ),
    ],
)
def test_with_hints(text, v4, v6, expected) -> None:
    assert hint_text("HTTPS", text, v4, v6) == expected


def ask(snap, name: str, rtype: str, seed: int, health=None) -> dns.message.Message:
    wire = DNSRecord.question(name, rtype).pack()
    health = health or view_of({}, generation=1)
    reply = resolve(Request(wire, CLIENT, snap, health, random.Random(seed), 1.0))
    return dns.message.from_wire(reply)


def hints_of(message: dns.message.Message) -> tuple[set[str], set[str], int]:
    (rrset,) = message.answer
    first = next(r for r in rrset if r.priority == 1)
    v4, v6 = first.params.get(ParamKey.IPV4HINT), first.params.get(ParamKey.IPV6HINT)
    v4 = {str(a) for a in v4.addresses} if v4 is not None else set()
    v6 = {str(a) for a in v6.addresses} if v6 is not None else set()
    return v4, v6, rrset.ttl


def addresses(message: dns.message.Message) -> set[str]:
    return {str(r) for rrset in message.answer for r in rrset}


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    directory: Path = tmp_path_factory.mktemp("svc")
    (directory / "svc.yaml").write_text(ZONE)
    config, _ = load_config(directory)
    return compile_snapshot(config, 1)


@pytest.mark.parametrize("rtype", ["HTTPS", "SVCB"])
def test_hints_are_the_a_answer_of_the_same_draws_and_the_same_pools(snap, rtype) -> None:
    # every pool has one IPv6 address: the AAAA answer of the same pool draw is the hint
    pools = set()
    for seed in range(300):
        v4, v6, ttl = hints_of(ask(snap, "www.svc.test", rtype, seed))
        assert v4 == addresses(ask(snap, "www.svc.test", "A", seed))  # the same client's A
        assert v6 == addresses(ask(snap, "www.svc.test", "AAAA", seed))
        assert ttl == 7  # the load balancer's, not the zone's 3600
        if v6:  # both hints name the pool of one draw
            assert {POOL_OF[a] for a in v4} == {POOL_OF[a] for a in v6}
        pools |= {POOL_OF[a] for a in v4}
    assert pools == {"a", "b", "c"}  # the random policy really drew


def test_records_naming_another_target_and_alias_mode_are_as_written(snap) -> None:
    (rrset,) = ask(snap, "www.svc.test", "HTTPS", 1).answer
    other = next(r for r in rrset if r.priority == 2)
    assert str(other) == '2 alt.svc.test. alpn="h2" ipv4hint="203.0.113.98"'
    (alias,) = ask(snap, "alias.svc.test", "HTTPS", 1).answer
    assert [str(r) for r in alias] == ["0 www.svc.test."] and alias.ttl == 7


def test_hints_follow_a_failover(snap) -> None:
    down = view_of({("a", "a1"): False, ("a", "a2"): False, ("a", "a6"): False}, generation=2)
    for seed in range(50):
        v4, v6, _ = hints_of(ask(snap, "www.svc.test", "HTTPS", seed, down))
        assert v4 == addresses(ask(snap, "www.svc.test", "A", seed, down))
        assert not v4 & {"192.0.2.10", "192.0.2.11"} and "2001:db8::a" not in v6


def test_a_name_without_https_records_answers_nodata_for_https(snap) -> None:
    message = dns.message.from_wire(
        resolve(
            Request(
                DNSRecord.question("www.svc.test", "CAA").pack(),
                CLIENT,
                snap,
                view_of({}, generation=1),
                random.Random(1),
                1.0,
            )
        )
    )
    assert message.answer == [] and message.rcode() == 0


def test_hints_of_several_pools_per_answer(snap) -> None:
    # one address from each of two regions, in each family; c has no IPv6 address
    a_down = view_of({("a", "a1"): False, ("a", "a2"): False, ("a", "a6"): False})
    cases = [
        (
            None,
            [{"192.0.2.10", "198.51.100.10"}, {"192.0.2.11", "198.51.100.10"}],
            {"2001:db8::a", "2001:db8::b"},
        ),
        (a_down, [{"198.51.100.10", "203.0.113.10"}], {"2001:db8::b"}),
    ]
    for health, v4_sets, v6_expected in cases:
        for seed in range(40):
            v4, v6, _ = hints_of(ask(snap, "two.svc.test", "HTTPS", seed, health))
            assert v4 == addresses(ask(snap, "two.svc.test", "A", seed, health))
            assert v4 in v4_sets
            assert v6 == addresses(ask(snap, "two.svc.test", "AAAA", seed, health)) == v6_expected


def test_when_all_down_all_hints_every_address_of_each_family(snap) -> None:
    down = view_of({("c", "c1"): False, ("b", "b1"): False, ("b", "b6"): False})
    v4, v6, _ = hints_of(ask(snap, "every.svc.test", "HTTPS", 1, down))
    assert v4 == addresses(ask(snap, "every.svc.test", "A", 1, down))
    assert v4 == {"203.0.113.10", "198.51.100.10"}
    assert v6 == addresses(ask(snap, "every.svc.test", "AAAA", 1, down)) == {"2001:db8::b"}


def test_check_warns_that_written_hints_are_replaced(tmp_path) -> None:
    text = ZONE.replace('"2 alt.svc.test. alpn=h2 ipv4hint=203.0.113.98"', '"2 alt.svc.test."')
    (tmp_path / "svc.yaml").write_text(text)
    warnings = [str(r) for r in check_directory(tmp_path)]
    # the first HTTPS record at www names hints; the SVCB record and the alias do not
    assert len(warnings) == 1, warnings
    assert "svc.yaml: warning: records.www: HTTPS 1 . " in warnings[0]
    assert "replaced by the addresses load balancer 'web' answers with" in warnings[0]
