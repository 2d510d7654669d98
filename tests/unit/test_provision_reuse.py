"""A config change is checked with what is already known of the files it does not touch
(their parsed data and the loader's results, keyed by the digest of their text): only the
edited file is loaded round-trip, parsed and validated; the outcome is what a check from
scratch gives; a file changed on disk since is read as it is now."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dnsd.config.loader import ParseCache, load_config
from dnsd.provision.directory import Known, prepare, read_texts
from dnsd.provision.edit import ChangeRefused, Editor
from dnsd.provision.reader import parse_file
from dnsd.provision.targets import Change, parse_route

DATA = Path(__file__).parent.parent / "data"
RECORDS = 3_000


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    d = tmp_path / "zones"
    shutil.copytree(DATA / "good", d)
    lines = ["zone: big.test", "soa: {mname: ns1.big.test., rname: h.big.test.}", "records:",
             '  "@": {NS: ns1.big.test.}', "  ns1: {A: 127.0.0.1}"]  # fmt: skip
    lines += [f"  h{i}: {{A: 10.0.{i // 256 % 256}.{i % 256}}}" for i in range(RECORDS)]
    (d / "big.test.yaml").write_text("\n".join(lines) + "\n")
    return d


def known_of(d: Path) -> Known:
    """What the config reader holds after a read: every file's digest and JSON data."""
    out = {}
    for path in sorted(d.glob("*.yaml")):
        ok, text, digest = parse_file(str(d), path.name)
        assert ok, text
        out[path.name] = (digest, json.loads(text))
    return out


def change(route: str, body: object, if_match: str | None = None) -> Change:
    return Change(parse_route(route), body, if_match)


CHANGES = [
    [change("pools/us-east/backends/n1", {"address": "192.0.2.201"})],
    [
        change("pools/fresh", {"backends": [{"name": "a", "address": "192.0.2.9"}]}),
        change("load_balancers/fresh", {"default_pools": ["fresh"]}),
        change("zones/example.test/records/fresh", {"lb": "fresh"}),
    ],
    [change("zones/big.test/records/h7", {"A": "10.9.9.9"})],
    [change("zones/example.test/records/mail", None)],
]


@pytest.mark.parametrize("changes", CHANGES, ids=["backend", "pool-lb-record", "big", "delete"])
def test_a_check_with_what_is_known_gives_what_a_check_from_scratch_gives(
    directory: Path, changes: list[Change]
) -> None:
    cache = ParseCache()
    load_config(directory, cache=cache)
    fresh = prepare(directory, changes)
    assert prepare(directory, changes, None, known_of(directory), cache.copy()) == fresh
    # before any read: the loader's results alone tell which files no change is about
    assert prepare(directory, changes, None, {}, cache.copy()) == fresh
    assert cache.parsed == len(list(directory.glob("*.yaml")))  # the server's: untouched


def test_only_the_edited_file_is_loaded_round_trip_parsed_and_validated(directory: Path) -> None:
    known = known_of(directory)
    texts = read_texts(directory)
    editor = Editor(texts, {name: doc for name, (_, doc) in known.items()})
    editor.apply(change("pools/us-east/backends/n1", {"address": "192.0.2.201"}))
    editor.apply(change("zones/example.test/records/n1", {"A": "192.0.2.202"}))
    assert editor.loaded == {"example.test.yaml"}  # not big.test.yaml, not child.*
    cache = ParseCache()
    load_config(directory, cache=cache)
    check = cache.copy()
    prepare(directory, [change("pools/us-east/backends/n1", {"address": "192.0.2.201"})],
            None, known, check)  # fmt: skip
    assert check.parsed == 1  # example.test.yaml's new text; the others came from the cache


def test_files_changed_since_are_read_as_they_are_now(directory: Path) -> None:
    known, cache = known_of(directory), ParseCache()
    load_config(directory, cache=cache)
    example = directory / "example.test.yaml"
    text = example.read_text()
    # by hand, after the server last read it: a pool added
    example.write_text(text.replace("pools:\n", "pools:\n  by-hand: {backends: [{name: h, address: 192.0.2.3}]}\n", 1))  # fmt: skip
    prepared = prepare(directory, [change("pools/by-hand/backends/h2", {"address": "192.0.2.4"})],
                       None, known, cache.copy())  # fmt: skip
    assert "by-hand" in prepared.new_texts["example.test.yaml"]
    # a file made invalid by hand since: the change is refused, as from scratch
    (directory / "child.example.test.yaml").write_text("zone: child.example.test\nrecords: [1]\n")
    with pytest.raises(ChangeRefused) as refused:
        prepare(directory, [change("pools/us-east/backends/n2", {"address": "192.0.2.5"})],
                None, known, cache.copy())  # fmt: skip
    assert refused.value.status == 400 and "child.example.test.yaml" in " ".join(
        refused.value.errors
    )


def test_a_file_no_change_is_about_is_not_parsed_for_the_lookups(directory: Path) -> None:
    from dnsd.provision.directory import _with_stand_ins

    cache = ParseCache()
    load_config(directory, cache=cache)
    texts = read_texts(directory)
    pool = [change("pools/us-east/backends/n1", {"address": "192.0.2.201"})]
    stand_ins = _with_stand_ins(texts, {}, cache, pool) or {}
    assert stand_ins["big.test.yaml"][1] == {}  # a zone, no sections: nothing to look up
    assert "example.test.yaml" not in stand_ins  # holds the pools: parsed
    record = [change("zones/big.test/records/h7", {"A": "10.9.9.9"})]
    assert "big.test.yaml" not in (_with_stand_ins(texts, {}, cache, record) or {})
    (directory / "big.test.yaml").write_text(texts["big.test.yaml"] + "  new: {A: 10.1.1.1}\n")
    assert "big.test.yaml" not in (_with_stand_ins(read_texts(directory), {}, cache, pool) or {})


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("zones/big.test/records/h7", {"A": "10.9.9.9"}),  # replaced
        ("zones/big.test/records/h7", {"A": ["10.9.9.9", "10.9.9.8"], "ttl": 60}),
        ("zones/big.test/records/new.name", {"AAAA": "2001:db8::1"}),  # added
        ("zones/big.test/records/h2999", None),  # deleted: the last line
        ("zones/big.test/records/h0", None),
    ],
)
def test_a_one_line_record_of_a_big_file_is_changed_in_its_text_as_the_round_trip_would(
    directory: Path, route: str, body: object
) -> None:
    texts = read_texts(directory)
    read = {name: doc for name, (_, doc) in known_of(directory).items()}
    spliced, round_trip = Editor(texts, read), Editor(texts)
    spliced.apply(change(route, body))
    round_trip.apply(change(route, body))
    assert spliced.loaded == set() and set(spliced.read_back) == {"big.test.yaml"}
    assert spliced.result() == round_trip.result()
    assert round_trip.loaded >= {"big.test.yaml"}


def test_a_record_not_on_one_line_is_changed_by_the_round_trip(directory: Path) -> None:
    big = directory / "big.test.yaml"
    big.write_text(big.read_text() + "  multi:\n    A: 10.3.3.3  # a comment\n")
    texts = read_texts(directory)
    read = {name: doc for name, (_, doc) in known_of(directory).items()}
    editor = Editor(texts, read)
    editor.apply(change("zones/big.test/records/multi", {"A": "10.4.4.4"}))
    assert editor.loaded == {"big.test.yaml"} and not editor.read_back
    round_trip = Editor(texts)
    round_trip.apply(change("zones/big.test/records/multi", {"A": "10.4.4.4"}))
    assert editor.result() == round_trip.result()
    # a second change to a file changed as text: the round trip, from the new text
    twice = Editor(texts, read)
    twice.apply(change("zones/big.test/records/h1", {"A": "10.5.5.5"}))
    twice.apply(change("zones/big.test/records/h2", None))
    assert twice.loaded == {"big.test.yaml"}
    text = twice.result()["big.test.yaml"]
    assert "  h1: {A: 10.5.5.5}\n" in text and "  h2:" not in text and "  h3: {A: 10.0.0.3}" in text
