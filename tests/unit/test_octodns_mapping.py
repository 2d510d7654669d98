"""octoDNS dynamic records ⇄ dnsd entries (dnsd/octodns/mapping.py): what the entries say,
and that reading them back gives the record octoDNS wrote — the property a second
`octodns-sync` planning nothing rests on."""

from __future__ import annotations

import pytest

from dnsd.octodns.mapping import CONTINENTS, Unmappable, dynamic_entries, dynamic_record

CHECK = {"protocol": "HTTPS", "host": "www.z.test", "path": "/_dns", "port": 443}
POOLS = {
    "eu": {"values": [{"value": "192.0.2.1", "weight": 3}, {"value": "192.0.2.2", "weight": 1}], "fallback": "us"},
    "us": {"values": [{"value": "192.0.2.3", "weight": 1}]},
    "ca": {"values": [{"value": "192.0.2.4", "weight": 1}], "fallback": "us"},
    "de": {"values": [{"value": "192.0.2.5", "weight": 1}]},
}  # fmt: skip
BASE = "octodns~www.z.test~A"


def entries(rules, pools=POOLS, check=CHECK, timing=None):
    used = {r["pool"] for r in rules}
    for rule in rules:  # fallbacks of used pools are used too
        pid = rule["pool"]
        while pools[pid].get("fallback"):
            pid = pools[pid]["fallback"]
            used.add(pid)
    chosen = {k: v for k, v in pools.items() if k in used}
    return dynamic_entries("www.z.test.", "A", 60, ["192.0.2.9"], chosen, rules, check, timing or {}), chosen  # fmt: skip


def round_trip(rules, **kw):
    out, chosen = entries(rules, **kw)
    config = {"load_balancers": out.load_balancers, "pools": out.pools, "monitors": out.monitors}
    return dynamic_record(BASE, config), chosen


RULES = [
    [{"pool": "eu", "geos": ["EU"]}, {"pool": "us"}],
    [{"pool": "de", "geos": ["EU-DE"]}, {"pool": "eu", "geos": ["EU"]}, {"pool": "us"}],
    [{"pool": "ca", "geos": ["NA-US-CA"]}, {"pool": "eu", "geos": ["AF", "EU"]}],
    [{"pool": "us"}],
    [{"pool": "de", "geos": ["EU-DE", "EU-FR", "AS-JP"]}, {"pool": "us", "geos": ["NA"]}],
]


@pytest.mark.parametrize("rules", RULES)
def test_reading_the_entries_back_gives_the_record(rules) -> None:
    record, chosen = round_trip(rules)
    assert record["values"] == ["192.0.2.9"] and record["ttl"] == 60
    assert record["dynamic"]["rules"] == [{**r, "geos": sorted(r["geos"])} if "geos" in r else r for r in rules]  # fmt: skip
    expected = {
        pid: {k: v for k, v in pool.items() if v is not None} for pid, pool in chosen.items()
    }
    assert record["dynamic"]["pools"] == expected
    assert record["octodns"] == {}  # octoDNS's default check: nothing to say


def test_a_continent_gives_each_of_its_countries_and_an_earlier_rule_keeps_its_own() -> None:
    out, _ = entries([{"pool": "de", "geos": ["EU-DE"]}, {"pool": "eu", "geos": ["EU"]}])
    top = out.load_balancers[BASE]
    assert top["steering"] == "geo" and top["fallback_pool"] == BASE
    assert top["country_pools"]["DE"] == [f"lb:{BASE}~rule0"]
    assert top["country_pools"]["FR"] == [f"lb:{BASE}~rule1"]
    assert {cc for cc, lbs in top["country_pools"].items() if lbs == [f"lb:{BASE}~rule1"]} == set(CONTINENTS["EU"]) - {"DE"}  # fmt: skip
    # a rule's chain ends at the record's own values, never at another rule's pools
    assert out.load_balancers[f"{BASE}~rule1"] == {
        "ttl": 60, "steering": "off", "default_pools": [f"{BASE}~eu", f"{BASE}~us"], "fallback_pool": BASE,
    }  # fmt: skip
    assert top["default_pools"] == [BASE]  # no catch-all rule: the values
    assert out.pools[BASE] == {"backends": [{"name": "192.0.2.9", "address": "192.0.2.9"}]}
    assert out.pools[f"{BASE}~eu"]["backends"][0] == {"name": "192.0.2.1", "address": "192.0.2.1", "weight": 3}  # fmt: skip


def test_health_check_and_timing_travel_both_ways() -> None:
    check = {"protocol": "HTTP", "host": "origin.z.test", "path": "/healthz", "port": 8080}
    record, _ = round_trip([{"pool": "us"}], check=check, timing={"interval": "2s"})
    assert record["octodns"] == {"healthcheck": {"protocol": "HTTP", "host": "origin.z.test", "path": "/healthz", "port": 8080}, "dnsd": {"healthcheck": {"interval": "2s"}}}  # fmt: skip
    out, _ = entries(
        [{"pool": "us"}], check={"protocol": "TCP", "port": 25, "host": None, "path": None}
    )
    assert out.monitors[BASE] == {"type": "tcp", "port": 25}


@pytest.mark.parametrize(
    ("rules", "check", "words"),
    [
        ([{"pool": "us", "subnets": ["10.0.0.0/8"]}], CHECK, "subnet"),
        ([{"pool": "us", "geos": ["EU-GB-ENG"]}], CHECK, "US and CA subdivisions only"),
        ([{"pool": "us"}], {"protocol": "ICMP", "port": None, "host": None, "path": None}, "ICMP"),
    ],
)
def test_what_dnsd_cannot_serve_is_refused(rules, check, words) -> None:
    with pytest.raises(Unmappable, match=words):
        entries(rules, check=check)


def test_value_status_is_refused() -> None:
    pools = {"us": {"values": [{"value": "192.0.2.3", "weight": 1, "status": "down"}]}}
    with pytest.raises(Unmappable, match="status"):
        entries([{"pool": "us"}], pools=pools)
