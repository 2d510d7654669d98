"""dnsd_queries_total counts each answer under the (qtype, rcode) of its question whatever
the length of the name asked, in both serving loops: a real `dnsd serve` is asked names
longer than 46 wire bytes (where counting by the reply's first bytes once ran out of
question and said NONE), repeated so the compiled loop answers them from its tables."""

from __future__ import annotations

from collections import Counter

import pytest
from dnslib import EDNS0, DNSRecord
from prometheus_client.parser import text_string_to_metric_families

from tests.admin_client import http
from tests.conftest import DATA
from tests.dnsclient import udp_raw
from tests.processes import DnsdProcess
from tests.waiting import until

LONG = "a" * 30 + "." + "b" * 30  # 63 wire bytes before the zone's name
ASKED = [  # (name, type, rcode the zone gives it)
    (f"{LONG}.apps.example.test", "A", "NOERROR"),  # the wildcard *.apps
    (f"{LONG}.mail.example.test", "AAAA", "NXDOMAIN"),
    (f"{LONG}.example.test", "TXT", "NOERROR"),  # the apex wildcard
    (f"{LONG}.example.test", "MX", "NOERROR"),  # NODATA at a wildcard
]
REPEATS = 20


def queries_total(port: int) -> Counter[tuple[str, str]]:
    status, text = http(port, "GET", "/metrics")
    assert status == 200
    counts: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "dnsd_queries_total" and sample.labels["transport"] == "udp":
                counts[(sample.labels["qtype"], sample.labels["rcode"])] += int(sample.value)
    return counts


def loop_answers(port: int, loop: str) -> float:
    _, text = http(port, "GET", "/metrics")
    prefix = f'dnsd_serving_loop_answers_total{{loop="{loop}"}}'
    return float(next(x for x in text.splitlines() if x.startswith(prefix)).split()[-1])


@pytest.mark.parametrize("loop", ["compiled", "pure"])
def test_a_long_name_is_counted_under_its_qtype_in_each_loop(loop: str) -> None:
    with DnsdProcess(DATA / "good", "--serving-loop", loop, "--rrl-rate", "0") as dnsd:
        before = queries_total(dnsd.admin_port)
        answered_before = loop_answers(dnsd.admin_port, loop)
        for name, qtype, rcode in ASKED:
            assert len(name) + 2 > 46  # its wire length: a length byte per label, the root
            for edns in (False, True):
                query = DNSRecord.question(name, qtype)
                if edns:
                    query.add_ar(EDNS0(udp_len=1232))
                for _ in range(REPEATS):
                    raw = udp_raw(dnsd.port, bytes(query.pack()))
                    assert raw is not None
                    assert DNSRecord.parse(raw).header.rcode == {"NOERROR": 0, "NXDOMAIN": 3}[rcode]
        wanted: Counter[tuple[str, str]] = Counter()
        for _, qtype, rcode in ASKED:
            wanted[(qtype, rcode)] += 2 * REPEATS
        # the compiled loop hands its counts over after each batch: a scrape may be early
        until(lambda: queries_total(dnsd.admin_port) - before == wanted, 3, "the counts")
        counted = queries_total(dnsd.admin_port) - before
        answered = loop_answers(dnsd.admin_port, loop) - answered_before
    assert counted == wanted
    assert ("NONE", "NOERROR") not in counted and ("NONE", "NXDOMAIN") not in counted
    assert answered >= 0.5 * sum(wanted.values())  # this loop's own code answered most
