"""The zone-file reader of dnsd's own against dnspython's alone: for generated files of
every line shape it reads and many it hands over, the same records (owners, types, TTLs,
RDATA wire, file and line) or the same error at the same place."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dnsd.config.zonefile import ZoneFileError, read_zone_file

ORIGIN = "zl.test."
DATA = Path(__file__).parent.parent / "data"

# Lines the fast reader reads (plus the owner and the TTL/class forms made below).
FAST_RDATA = [
    "A 192.0.2.{n}",
    "A 10.0.{n}.255",
    "AAAA 2001:db8::{n:x}",
    "AAAA 2001:DB8:0:0:0:0:0:{n:x}",
    "AAAA ::{n:x}",
    "AAAA 2001:db8::",
    'TXT "v=spf1 -all" "n {n}"',
    "TXT plain{n} words",
    'TXT ""',
    'TXT "semi;colon" ; and a comment',
    "MX 10 mail{n}",
    "MX {n} Mail.Example.NET.",
    "MX 0 @",
    "CNAME target{n}",
    "CNAME Other.ZL.test.",
    "NS ns{n}.elsewhere.",
    "PTR host{n}",
]
# Lines it hands over.
OTHER_LINES = [
    "@ IN SOA ns1 hostmaster ( 2 3600 600 86400 300 )",
    "@ 300 IN SOA ns1 hostmaster (\n  3 ; serial\n  3600 600 86400 300 )",
    'x{n} IN TXT ( "multi"\n   "line" )',
    'q{n} TXT "with \\"escaped\\" quote"',
    'q{n} TXT "tab\tinside"',
    "q{n} TXT caf\u00e9",
    "e\\.{n} A 192.0.2.7",
    "d{n} 1h IN A 192.0.2.8",
    "d{n} IN 2W A 192.0.2.9",
    "out{n}.example. A 192.0.2.1",
    "s{n} SRV 0 5 5060 sip{n}",
    's{n} CAA 0 issue "ca.example"',
    "s{n} TYPE65400 \\# 2 abcd",
    's{n} HINFO "cpu" "os"',
    "w{n} NSEC next{n} A",
    "$GENERATE 1-3 g$ A 10.9.9.$",
    "$TTL 1h",
    "$TTL 120",
    "$ORIGIN sub.zl.test.",
    "$ORIGIN zl.test.",
    "$ORIGIN ex\\.a.zl.test.",
    "c{n} CNAME a{n}",
    "a{n} A 192.0.2.1",
]
# Lines that are errors (for both readers).
BAD_LINES = [
    "{long} A 192.0.2.1",
    "$FOO bar",
    "c{n} CH A 192.0.2.1",
    "h{n} A 192.0.2.300",
    "h{n} A 01.2.3.4",
    "h{n} AAAA 1:2:3:4:5:6:7::",
    "h{n} AAAA ::ffff:192.0.2.1",
    "h{n} AAAA 12345::1",
    "h{n} MX 70000 mx",
    "h{n} MX mx",
    "h{n} A",
    "h{n} BOGUS 1",
    "(  )",
    "h{n} A 192.0.2.1 extra",
    'h{n}"x A 192.0.2.1',
]


def _owner(rng: random.Random, n: int) -> str:
    return rng.choice(
        ["", "", "@", f"h{n % 50}", f"H{n % 50}", f"a{n % 30}.b", f"h{n % 50}.zl.test.", "*", "*.w"]
    )


def _line(rng: random.Random, n: int, bad: float) -> str:
    long = ".".join(["x" * 63] * 4)
    if rng.random() < bad:
        return rng.choice(BAD_LINES).format(n=n, long=long)
    if rng.random() < 0.2:
        return rng.choice(OTHER_LINES).format(n=n, long=long)
    owner = _owner(rng, n)
    ttl = rng.choice(["", "", "60 ", "3600 ", "0 "])
    klass = rng.choice(["", "IN ", "in "])
    middle = ttl + klass if rng.random() < 0.7 else klass + ttl
    rdata = rng.choice(FAST_RDATA).format(n=n % 300)
    if rdata.startswith("CNAME") and rng.random() < 0.9:
        owner = f"cn{n}"  # mostly apart from other data (a clash ends the file)
    space = rng.choice([" ", "\t", "  "])
    if not owner:
        return space + middle + rdata
    return owner + space + middle + rdata + rng.choice(["", " ", " ; note", "\t;x"])


def _zone(rng: random.Random, records: int, bad: float) -> str:
    lines = [f"$ORIGIN {ORIGIN}", "@ IN SOA ns1 hostmaster 1 3600 600 86400 300", "@ NS ns1"]
    lines += [_line(rng, n, bad) for n in range(records)]
    return "\n".join(lines) + "\n"


def _read(path: Path, dnspython_only: bool) -> object:
    try:
        return read_zone_file(path, ORIGIN, path.parent, 300, dnspython_only=dnspython_only)
    except ZoneFileError as exc:
        return ("error", exc.file, exc.line, exc.message)


def _same(path: Path) -> object:
    fast, reference = _read(path, False), _read(path, True)
    assert fast == reference
    return fast


@pytest.mark.parametrize("seed", range(40))
def test_generated_files_read_alike(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "zl.zone"
    bad = 0.0 if seed % 2 else 0.01
    path.write_text(_zone(rng, rng.choice([5, 30, 200]), bad))
    _same(path)


def test_most_generated_files_load(tmp_path: Path) -> None:
    """The comparison above is mostly between records, not between errors: of the files
    without a bad line, most load (the CNAME clashes aside)."""
    loaded = []
    for seed in range(1, 40, 2):
        rng = random.Random(seed)
        path = tmp_path / f"zl{seed}.zone"
        path.write_text(_zone(rng, rng.choice([5, 30, 200]), 0.0))
        loaded.append(isinstance(_read(path, False), list))
    assert sum(loaded) >= len(loaded) // 3


@pytest.mark.parametrize("seed", range(40))
def test_fast_lines_only_read_alike(tmp_path: Path, seed: int) -> None:
    """Files the fast reader reads whole: duplicates, TTL minima, CNAME clashes."""
    rng = random.Random(1000 + seed)
    path = tmp_path / "zl.zone"
    lines = [f"$ORIGIN {ORIGIN}", "$TTL 120", "@ IN SOA ns1 hostmaster 1 3600 600 86400 300"]
    for n in range(rng.choice([10, 100, 400])):
        owner = _owner(rng, n % 7)
        rdata = rng.choice(FAST_RDATA).format(n=n % 3)
        lines.append((owner or " ") + " " + rng.choice(["", "30 ", "90 IN "]) + rdata)
    path.write_text("\n".join(lines) + "\n")
    _same(path)


def test_records_are_read_by_the_fast_reader(tmp_path: Path) -> None:
    """A file of the common shapes gives what dnspython gives (and the test above is
    not comparing two empty lists)."""
    path = tmp_path / "zl.zone"
    path.write_text(
        "$ORIGIN zl.test.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 300\n"
        "www 60 IN A 192.0.2.1\n IN AAAA 2001:db8::1\nmx MX 10 Mail\n"
        't TXT "a b" c\nalias CNAME www\n'
    )
    found = _same(path)
    assert isinstance(found, list)
    got = {(r.owner, r.rtype, r.ttl, r.line, r.wire) for r in found}
    assert ("www.zl.test.", "A", 60, 4, bytes([192, 0, 2, 1])) in got
    assert ("www.zl.test.", "AAAA", 300, 5, bytes.fromhex("20010db8" + "0" * 23 + "1")) in got
    assert ("mx.zl.test.", "MX", 300, 6, b"\x00\x0a\x04Mail\x02zl\x04test\x00") in got
    assert ("t.zl.test.", "TXT", 300, 7, b"\x03a b\x01c") in got


def test_an_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "zl.zone"
    path.write_text(
        "$ORIGIN zl.test.\n@ SOA ns1 hostmaster 1 3600 600 86400 300\n"
        "a A 192.0.2.1\nb A 192.0.2.300\nc A 192.0.2.3\n"
    )
    found = _same(path)
    assert found[:3] == ("error", str(path), 4)  # type: ignore[index]


def test_a_cname_beside_other_data_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "zl.zone"
    path.write_text(
        "$ORIGIN zl.test.\n@ SOA ns1 hostmaster 1 3600 600 86400 300\n"
        "a A 192.0.2.1\nb A 192.0.2.2\na CNAME b\n"
    )
    found = _same(path)
    assert found[:3] == ("error", str(path), 5)  # type: ignore[index]


def test_includes_read_alike(tmp_path: Path) -> None:
    (tmp_path / "inner.zone").write_text('x A 192.0.2.9\n IN TXT inner\np TXT ( "a"\n "b" )\n')
    path = tmp_path / "zl.zone"
    path.write_text(
        "$ORIGIN zl.test.\n$TTL 60\n@ SOA ns1 hostmaster 1 3600 600 86400 300\n"
        "$INCLUDE inner.zone sub\ny A 192.0.2.1\nz AAAA ::1\n"
    )
    found = _same(path)
    assert any(r.file.endswith("inner.zone") for r in found)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "origin"),
    [
        ("differential/diff.example.zone", "diff.example."),
        ("rich/rich.example.zone", "rich.example."),
    ],
)
def test_the_project_zone_files_read_alike(name: str, origin: str) -> None:
    path = DATA / name
    fast = read_zone_file(path, origin, path.parent, 3600)
    assert fast == read_zone_file(path, origin, path.parent, 3600, dnspython_only=True)
    assert len(fast) > 10
