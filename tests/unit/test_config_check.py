"""`dnsd check`: every mistake reported at once, with file, line, path and a helpful message."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dnsd.config.loader import check_directory, load_config
from tests.conftest import DATA

BAD = DATA / "bad"

# (file, line, path, words in the message) for every error in tests/data/bad/
EXPECTED = [
    ("a-zone.yaml", 2, "ttl", "between 0 and"),
    ("a-zone.yaml", 6, "soa.serail", 'did you mean "serial"'),
    ("a-zone.yaml", 10, "records.ns1.A", "invalid A value '192.0.2.300'"),
    ("a-zone.yaml", 11, "records.www.lb", "undefined load balancer 'nosuch'"),
    ("a-zone.yaml", 12, "records.alias", "CNAME cannot stand beside other records"),
    ("a-zone.yaml", 13, "records.mx.MX", "invalid MX value"),
    ("a-zone.yaml", 14, "records.a..b", "empty label"),
    ("a-zone.yaml", 15, "records.txt.TXTT", 'did you mean "TXT"'),
    ("a-zone.yaml", 16, "records.out.example.org.", "outside zone bad.test."),
    ("b-pools.yaml", 3, "monitors.web-check.type", 'did you mean "http"'),
    ("b-pools.yaml", 4, "monitors.web-check.interval", "expected a duration"),
    ("b-pools.yaml", 5, "monitors.web-check.sources", "unknown region 'MARS'"),
    ("b-pools.yaml", 6, "monitors.web-check.quorum", "larger than the 1 sources"),
    (
        "b-pools.yaml",
        9,
        "pools.east.monitor",
        "undefined monitor 'web-chek' (did you mean \"web-check\"?)",
    ),
    ("b-pools.yaml", 13, "pools.east.backends[1].name", "duplicate backend name 'e1'"),
    ("b-pools.yaml", 14, "pools.east.backends[2].adress", 'did you mean "address"'),
    ("b-pools.yaml", 14, "pools.east.backends[2]", 'missing required key "address"'),
    ("b-pools.yaml", 17, "load_balancers.web.steering", "'nearest' is not one of"),
    ("b-pools.yaml", 18, "load_balancers.web.default_pools[1]", "undefined pool 'west'"),
    ("b-pools.yaml", 19, "load_balancers.web.region_pools.EUROPE", "unknown region 'EUROPE'"),
    ("b-pools.yaml", 20, "load_balancers.web.country_pools.XX", "unknown country code 'XX'"),
    ("b-pools.yaml", 21, "load_balancers.web.trickle_ratio", "between 0.0 and 1.0"),
    ("b-pools.yaml", 22, "load_balancers.a", "cycle: a -> b -> a"),
    ("b-pools.yaml", 25, "client_zones.10.1.0.0/33", "not a subnet"),
    ("c-duplicate.yaml", 2, "pools.east", "also defined at " + str(BAD / "b-pools.yaml") + ":8"),
    ("d-syntax.yaml", 4, "", "YAML syntax error"),
]


def test_every_mistake_is_reported_with_file_line_and_path() -> None:
    errors = [r for r in check_directory(BAD) if not r.warning]
    found = {(Path(r.file).name, r.line, r.path): r.message for r in errors}
    for file, line, path, words in EXPECTED:
        assert (file, line, path) in found, f"missing {file}:{line}: {path}"
        assert words in found[(file, line, path)]
    assert len(errors) == len(EXPECTED), "\n".join(str(r) for r in errors)


def test_dnsd_check_cli_prints_every_mistake_and_exits_1() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dnsd", "check", str(BAD)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    for file, line, path, _ in EXPECTED:
        prefix = f"{BAD / file}:{line}: " + (f"{path}: " if path else "")
        assert prefix in proc.stderr, prefix
    assert f"{len(EXPECTED)} error(s)" in proc.stderr


def test_dnsd_check_on_the_bundled_zones_is_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dnsd", "check", "zones"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "OK" in proc.stdout


HEADER = """\
zone: t.test
soa: {mname: ns1.t.test., rname: h.t.test.}
records:
  "@": {NS: ns1.t.test.}
  ns1: {A: 192.0.2.1}
"""

POOL = """\
pools:
  p: {backends: [{name: b, address: 192.0.2.9}]}
"""


def write(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(textwrap.dedent(text))
    return tmp_path


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # ensure duplicate keys, which YAML would silently overwrite, are errors
        ({"z": HEADER + "  ns1: {A: 192.0.2.2}\n"}, "z.yaml:6: records.ns1: duplicate key"),
        # ensure a zone file must have an SOA
        ({"z": "zone: t.test\nrecords: {}\n"}, 'z.yaml:1: soa: missing required key "soa"'),
        # ensure records need a zone name in the same file
        ({"z": "records:\n  www: {A: 192.0.2.1}\n"}, 'records need a "zone" name'),
        # ensure the same zone in two files names the other file
        ({"a": HEADER, "b": HEADER}, "zone t.test. is also defined in"),
        # ensure unknown top-level keys get a hint
        (
            {"z": HEADER + "load_balancer: {}\n"},
            'z.yaml:6: load_balancer: unknown key (did you mean "load_balancers"?)',
        ),
        # ensure CNAME is refused at the apex
        (
            {
                "z": HEADER.replace(
                    '"@": {NS: ns1.t.test.}', '"@": {NS: ns1.t.test., CNAME: x.t.test.}'
                )
            },
            "CNAME is not allowed at the zone apex",
        ),
        # ensure proximity steering needs coordinates on its pools
        (
            {
                "z": HEADER
                + "  www: {lb: w}\n"
                + POOL
                + "load_balancers:\n  w: {steering: proximity, default_pools: [p]}\n"
            },
            "uses proximity steering: the pool needs latitude and longitude",
        ),
        # ensure a backend address must be an IP address or a host name
        (
            {"z": HEADER + "pools:\n  p: {backends: [{name: b, address: 300.1.1.1}]}\n"},
            "neither an IP address nor a host name",
        ),
        # ensure zonal affinity modes are checked
        (
            {
                "z": HEADER
                + "pools:\n  p:\n    zonal_affinity: {mode: STAY}\n    backends: [{name: b, address: 192.0.2.9}]\n"
            },
            "pools.p.zonal_affinity.mode: 'STAY' is not one of",
        ),
        # ensure subdivision_pools keys are US/CA subdivisions
        (
            {
                "z": HEADER
                + "  www: {lb: w}\n"
                + POOL
                + "load_balancers:\n  w: {steering: geo, default_pools: [p], subdivision_pools: {US-XX: [p]}}\n"
            },
            "load_balancers.w.subdivision_pools.US-XX: unknown subdivision 'US-XX'",
        ),
        # ensure an empty directory is an error, not an empty server
        ({}, "no *.yaml files"),
    ],
)
def test_single_mistakes(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    reasons = check_directory(write(tmp_path, **files))
    text = "\n".join(str(r) for r in reasons if not r.warning)
    assert expected in text


def test_bare_off_means_the_off_policy(tmp_path: Path) -> None:
    lb = "load_balancers:\n  w: {steering: off, default_pools: [p]}\n  q: {steering: 'off', default_pools: [p]}\n"
    config, _ = load_config(
        write(tmp_path, z=HEADER + "  www: {lb: w}\n  api: {lb: q}\n" + POOL + lb)
    )
    assert config.load_balancers["w"].steering == "off"
    assert config.load_balancers["q"].steering == "off"


def test_unquoted_ipv6_and_yes_no_stay_strings(tmp_path: Path) -> None:
    text = HEADER + "  v6: {AAAA: 2001:db8::1}\n  no: {TXT: yes}\n"
    config, _ = load_config(write(tmp_path, z=text))
    rrsets = {(s.owner, s.rtype) for s in config.zones[0].rrsets}
    assert ("v6.t.test.", 28) in rrsets and ("no.t.test.", 16) in rrsets


def test_warnings_do_not_fail_the_check(tmp_path: Path) -> None:
    reasons = check_directory(write(tmp_path, z=HEADER + POOL))
    assert [str(r).split(": ", 1)[1] for r in reasons] == [
        "warning: pools.p: pool is not used by any load balancer"
    ]


# -- client_networks, client_region, probe keys, and the warnings ---------------------
NETS_CASES = [
    # (files, expected error, or None when valid)
    ({"z": HEADER + "client_networks:\n  10.1.0.0/16: {region: WEU}\n  2001:db8:1::/48: {region: NEAS, country: JP}\n"}, None),
    ({"z": HEADER + "client_networks:\n  10.0.0.0/8: {region: WEU}\n  10.1.0.0/16: {country: JP}\n"}, None),  # overlaps allowed
    ({"z": HEADER + "client_networks:\n  10.1.0.1/16: {region: WEU}\n"}, "z.yaml:7: client_networks.10.1.0.1/16: not a subnet: 10.1.0.1/16 has host bits set"),
    ({"z": HEADER + "client_networks:\n  10.1.0.0/16: {region: EUROPE}\n"}, "client_networks.10.1.0.0/16.region: unknown region 'EUROPE'"),
    ({"z": HEADER + "client_networks:\n  10.1.0.0/16: {country: XX}\n"}, "client_networks.10.1.0.0/16.country: unknown country code 'XX'"),
    ({"z": HEADER + "client_networks:\n  10.1.0.0/16: {}\n"}, "client_networks.10.1.0.0/16: needs a region or a country"),
    ({"z": HEADER + "client_networks:\n  10.1.0.0/16: {regoin: WEU}\n"}, 'did you mean "region"'),
    ({"z": HEADER, "n": "client_networks:\n  10.1.0.0/16: {region: WEU}\n", "o": "client_networks:\n  10.1.0.0/16: {region: EEU}\n"},
     "o.yaml:2: client_networks.10.1.0.0/16: network also mapped at"),
    ({"z": HEADER, "n": "client_networks:\n  '2001:db8:1::/48': {region: WEU}\n", "o": "client_networks:\n  '2001:0db8:0001::/48': {region: EEU}\n"},
     "network also mapped at"),  # the same IPv6 network written another way
    ({"z": HEADER + "  www: {lb: w}\n" + POOL + "load_balancers:\n  w: {default_pools: [p], client_region: anycast}\n"},
     "load_balancers.w.client_region: 'anycast' is not one of"),
    ({"z": HEADER + "monitors:\n  m: {type: dns, expected_rcodes: [NOERROR, BOGUS]}\n"}, "monitors.m.expected_rcodes: unknown rcode 'BOGUS'"),
    ({"z": HEADER + "monitors:\n  m: {type: dns, query_type: NOPE}\n"}, "monitors.m.query_type: unknown record type 'NOPE'"),
    ({"z": HEADER + "monitors:\n  m: {type: https, ca_file: nowhere.pem}\n"}, "monitors.m.ca_file: cannot load CA file"),
]  # fmt: skip


@pytest.mark.parametrize(("files", "expected"), NETS_CASES)
def test_client_networks_client_region_and_probe_keys(tmp_path, files, expected) -> None:
    reasons = check_directory(write(tmp_path, **files))
    errors = "\n".join(str(r) for r in reasons if not r.warning)
    if expected is None:
        assert errors == ""
    else:
        assert expected in errors, errors


def test_client_networks_country_alone_gives_its_region(tmp_path) -> None:
    text = (
        HEADER
        + "client_networks:\n  10.2.0.0/16: {country: JP}\n  10.3.0.0/16: {region: WEU, country: JP}\n"
    )
    config, _ = load_config(write(tmp_path, z=text))
    assert [(str(n.network), n.region, n.country) for n in config.client_networks] == [
        ("10.2.0.0/16", "NEAS", "JP"),
        ("10.3.0.0/16", "WEU", "JP"),  # an explicit region wins
    ]


WARNING_CASES = [
    ("load_balancers:\n  w: {steering: random, default_pools: [p], trickle_ratio: 0.1}\n",
     "load_balancers.w.trickle_ratio: steering: random has no primary pool: the trickle ratio is ignored"),
    ("load_balancers:\n  w: {default_pools: [p], ttl: 301}\n",
     "load_balancers.w.ttl: ttl 301 s is above 300 s"),
]  # fmt: skip


@pytest.mark.parametrize(("lbs", "expected"), WARNING_CASES)
def test_check_warns_about_ignored_trickle_and_long_ttls(tmp_path, lbs, expected) -> None:
    reasons = check_directory(write(tmp_path, z=HEADER + "  www: {lb: w}\n" + POOL + lbs))
    assert not [r for r in reasons if not r.warning]
    assert expected in "\n".join(str(r) for r in reasons if r.warning)


@pytest.mark.parametrize(
    ("monitor", "warned"),
    [
        ("{type: tcp, interval: 1s, timeout: 1s}", "monitors.m.timeout: timeout (1s) is not shorter than the interval (1s)"),
        ("{type: tcp, interval: 2s}", "monitors.m.interval: timeout (5s) is not shorter than the interval (2s)"),
        ("{type: tcp, interval: 1s, timeout: 0.5s}", None),
        ("{type: tcp}", None),
    ],
)  # fmt: skip
def test_check_warns_when_a_probe_can_outlast_its_interval(tmp_path, monitor, warned) -> None:
    reasons = check_directory(write(tmp_path, z=HEADER + f"monitors:\n  m: {monitor}\n"))
    assert not [r for r in reasons if not r.warning]
    warnings = "\n".join(str(r) for r in reasons if r.warning and "timeout" in str(r))
    assert (warned in warnings) if warned else warnings == "", warnings


def test_no_warning_for_a_300_second_ttl(tmp_path) -> None:
    lbs = "load_balancers:\n  w: {default_pools: [p], ttl: 300}\n"
    assert check_directory(write(tmp_path, z=HEADER + "  www: {lb: w}\n" + POOL + lbs)) == []


def test_proximity_accepts_a_fallback_pool_without_coordinates(tmp_path) -> None:
    pools = (
        "pools:\n  p: {latitude: 1, longitude: 2, backends: [{name: b, address: 192.0.2.9}]}\n"
        "  sorry: {backends: [{name: s, address: 192.0.2.10}]}\n"
    )
    lbs = "load_balancers:\n  w: {steering: proximity, default_pools: [p], fallback_pool: sorry}\n"
    assert check_directory(write(tmp_path, z=HEADER + "  www: {lb: w}\n" + pools + lbs)) == []
    # a default pool still needs them
    lbs = "load_balancers:\n  w: {steering: proximity, default_pools: [p, sorry]}\n"
    errors = [
        r
        for r in check_directory(write(tmp_path, z=HEADER + "  www: {lb: w}\n" + pools + lbs))
        if not r.warning
    ]
    assert "the pool needs latitude and longitude" in str(errors[0])


CLI_WARNINGS = [
    ("load_balancers:\n  w: {default_pools: [p], ttl: 301}\n",
     "load_balancers.w.ttl: ttl 301 s is above 300 s",
     "outage bound = TTL + interval × unhealthy_threshold + probe timeout"),
    ("load_balancers:\n  w: {steering: off, default_pools: [p], trickle_ratio: 0.1}\n",
     "load_balancers.w.trickle_ratio: steering: off with trickle_ratio 0.1",
     "10% of answers still go to the next healthy pool"),
]  # fmt: skip


@pytest.mark.parametrize(("lbs", "where", "words"), CLI_WARNINGS)
def test_dnsd_check_cli_warns_on_the_outage_bound_and_a_trickle_on_off(
    tmp_path, lbs, where, words
) -> None:
    """docs/steering.md: the TTL warning quotes the whole outage bound (the probe timeout
    included); a trickle on an `off` load balancer is pointed out. Warnings keep exit 0."""
    directory = write(tmp_path, z=HEADER + "  www: {lb: w}\n" + POOL + lbs)
    proc = subprocess.run(
        [sys.executable, "-m", "dnsd", "check", str(directory)], capture_output=True, text=True
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert where in out and words in out, out
