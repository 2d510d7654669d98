"""The pure parts of dynamic update (dnsd.serve.update_decision): a grant's name patterns, where
`*` is one or more labels, and how a new TXT value is written to `records:`."""

from __future__ import annotations

import dns.rdata
import dns.rdataclass
import dns.rdatatype

from dnsd.serve.update_decision import parse_value, pattern_matches, value_text


def labels(text: str) -> tuple[str, ...]:
    return tuple(text.split(".")) if text else ()


def test_a_star_is_one_or_more_labels() -> None:
    assert pattern_matches(labels("_acme-challenge.*"), labels("_acme-challenge.www"))
    assert pattern_matches(labels("_acme-challenge.*"), labels("_acme-challenge.a.b"))
    assert not pattern_matches(labels("_acme-challenge.*"), labels("_acme-challenge"))
    assert pattern_matches(labels("*.k8s"), labels("a.b.k8s"))
    assert not pattern_matches(labels("*.k8s"), labels("k8s"))
    assert not pattern_matches(labels("*.k8s"), labels("a.k8s.x"))
    assert pattern_matches((), ())  # @
    assert not pattern_matches((), labels("www"))
    assert not pattern_matches(labels("*"), ())  # the apex is not "one or more labels"


def test_a_new_txt_value_reads_back_the_same() -> None:
    for text in ['"token"', '"two words"', '"a" "b"', '"' + "x" * 255 + '" "y"', '"\\"q"']:
        rdata = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.TXT, text)
        written = value_text(rdata)
        assert parse_value(16, written, "example.test.") == rdata, (text, written)
    plain = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.TXT, '"token"')
    assert value_text(plain) == "token"
