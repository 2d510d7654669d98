"""The one rule from a steering decision (`LbAnswer`) to records (dnsd.steering.records),
which the query path and zone transfers both only convert: a CNAME alone, else one A or
AAAA per address (ANY as A), nothing for a negative answer; every record at the decision's
TTL — for a nested load balancer the outer one's, with the innermost level's answer."""

from __future__ import annotations

import pytest
from dnslib import QTYPE

from dnsd.steering.draws import Outcome
from dnsd.steering.records import LbAnswer, LbRecord, decision_records
from dnsd.xfr.lb_answers import rrsets_of
from tests.builders import lb
from tests.unit.test_steering import run


def decision(addresses: tuple[str, ...] = (), cname: str | None = None, ttl: int = 30) -> LbAnswer:
    return LbAnswer("lb", ttl, Outcome(addresses, cname, "p", False, 0, ("p",)))


V4 = ("192.0.2.1", "192.0.2.2")
V6 = ("2001:db8::1",)


@pytest.mark.parametrize(
    ("made", "qtype", "expected"),
    [
        (decision(V4), QTYPE.A, (LbRecord(1, 30, "192.0.2.1"), LbRecord(1, 30, "192.0.2.2"))),
        (decision(V6, ttl=60), QTYPE.AAAA, (LbRecord(28, 60, "2001:db8::1"),)),
        (decision(V4[:1]), QTYPE.ANY, (LbRecord(1, 30, "192.0.2.1"),)),
        (decision(cname="origin.example.net."), QTYPE.A, (LbRecord(5, 30, "origin.example.net."),)),
        (decision(cname="origin.example.net."), QTYPE.AAAA, (LbRecord(5, 30, "origin.example.net."),)),
        (decision(cname="origin.example.net."), QTYPE.ANY, (LbRecord(5, 30, "origin.example.net."),)),
        (decision(), QTYPE.A, ()),
        (decision(), QTYPE.AAAA, ()),
    ],
    ids=["A", "AAAA", "ANY-as-A", "CNAME-A", "CNAME-AAAA", "CNAME-ANY", "empty-A", "empty-AAAA"],
)  # fmt: skip
def test_decision_records(made: LbAnswer, qtype: int, expected: tuple[LbRecord, ...]) -> None:
    assert decision_records(made, qtype) == expected


def test_a_nested_answer_has_the_outer_ttl_and_the_explanation_carries_it() -> None:
    outer = lb("outer", ["lb:inner"], ttl=20)
    inner = lb("inner", ["p1"], ttl=60)
    explained = run([outer, inner], name="outer")
    assert explained.answer is not None and explained.answer.lb == "outer"
    assert decision_records(explained.answer, QTYPE.A) == (LbRecord(1, 20, "192.0.2.1"),)
    assert explained.to_json()["answer"] == ["192.0.2.1"]
    assert explained.innermost().addresses == explained.answer.outcome.addresses


def test_the_record_types_are_the_dns_type_codes() -> None:
    made = decision_records(decision(V4[:1]), QTYPE.A) + decision_records(decision(V6), QTYPE.AAAA)
    made += decision_records(decision(cname="o.example.net."), QTYPE.A)
    assert [QTYPE.get(r.rtype) for r in made] == ["A", "AAAA", "CNAME"]


def test_transfers_convert_the_records_one_rrset_per_type() -> None:
    both = decision_records(decision(V4), QTYPE.A) + decision_records(decision(V6), QTYPE.AAAA)
    assert [r.to_text() for r in rrsets_of("www.example.test.", (30, both))] == [
        "www.example.test. 30 IN A 192.0.2.1\nwww.example.test. 30 IN A 192.0.2.2",
        "www.example.test. 30 IN AAAA 2001:db8::1",
    ]
    cname = decision_records(decision(cname="o.example.net."), QTYPE.A)
    assert [r.to_text() for r in rrsets_of("www.example.test.", (30, cname))] == [
        "www.example.test. 30 IN CNAME o.example.net."
    ]
    assert rrsets_of("www.example.test.", (30, ())) == []
