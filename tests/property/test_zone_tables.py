"""Zone answer tables (dnsd.zone_tables) give the full path's bytes: every owner name of the
rich, differential and fast test zones, names below each (NXDOMAIN, referrals, wildcard
synthesis, DNAME), the SOA's own names, every kind of type, mixed case, RD/CD, EDNS sizes
and DO, UDP and TCP — whatever the tables answer equals `resolve`'s reply, and the compiled
loop's walk (dnsd/_fastloop.c, over a real UDP socket) sends the Python walk's bytes and
counts them under their count key. Answers from the tables are not remembered per name."""

from __future__ import annotations

import dataclasses
import ipaddress
import random
import socket
import time
from array import array

import pytest
from dnslib import EDNS0, DNSRecord

import dnsd._fastloop as fastloop
from dnsd import zone_tables
from dnsd.config.loader import load_config
from dnsd.fastpath import AnswerCache
from dnsd.health.view import view_of
from dnsd.reply import Client, count_key
from dnsd.request import Request
from dnsd.resolve import resolve
from dnsd.snapshot import Snapshot, compile_snapshot, with_serials
from dnsd.zone_tables.packed import packed
from tests.conftest import DATA, GEO
from tests.tiers import examples

TYPES = [
    "A",
    "AAAA",
    "TXT",
    "MX",
    "NS",
    "SOA",
    "CNAME",
    "DS",
    "SRV",
    "PTR",
    "CAA",
    "HTTPS",
    "SVCB",
    "DNAME",
    "NAPTR",
    "TYPE65280",
    "TYPE999",
    "ANY",
    "AXFR",
]
DATASETS = ["rich", "differential", "fast"]
HEALTHY = view_of({})


def snapshot(dataset: str) -> Snapshot:
    config, _ = load_config(DATA / dataset)
    return compile_snapshot(config, 1, geo=GEO)


def names_of(snap: Snapshot) -> list[str]:
    """Every owner, names below each, and the SOA's names and their parents."""
    names = []
    for zone in snap.zones.values():
        for name in zone.nodes:
            names += [name, f"zz.{name}", f"a.b.{name}", f"ns.{name}", f"dnsd-probe-q.{name}"]
        soa = zone.soa.rdata
        for text in (str(soa.mname), str(soa.rname)):
            up = text.split(".", 1)[1]
            names += [text, f"q.{text}", up, f"q.{up}"]
    return names


def query(rng: random.Random, name: str, qtype: str) -> bytes:
    q = DNSRecord.question("".join(c.upper() if rng.random() < 0.3 else c for c in name), qtype)
    q.header.id = rng.randrange(65536)
    q.header.rd = rng.random() < 0.5
    q.header.cd = rng.random() < 0.2
    if rng.random() < 0.6:
        q.add_ar(
            EDNS0(udp_len=rng.choice([512, 1232, 4096]), flags="do" if rng.random() < 0.4 else "")
        )
    return bytes(q.pack())


def full_path(snap: Snapshot, wire: bytes, transport: str) -> bytes | None:
    client = Client(ipaddress.ip_address("127.0.0.1"), transport)  # type: ignore[arg-type]
    return resolve(Request(wire, client, snap, HEALTHY, random.Random(1), 1000.0))


@pytest.mark.parametrize("dataset", DATASETS)
def test_the_tables_answer_as_the_full_path(dataset: str) -> None:
    snap = snapshot(dataset)
    tables = zone_tables.ready(snap, background=False)
    assert tables is not None
    rng = random.Random(dataset)
    names = names_of(snap)
    asked = answered = 0
    for _ in range(examples(6000)):
        wire = query(rng, rng.choice(names), rng.choice(TYPES))
        for transport in ("udp", "tcp"):
            asked += 1
            got = zone_tables.answer(tables, wire, transport)
            if got is not None:
                answered += 1
                assert got == full_path(snap, wire, transport), DNSRecord.parse(wire)
    assert answered > 0.6 * asked, (answered, asked)  # most of it: not a walk that gives up


@pytest.mark.parametrize("dataset", DATASETS)
def test_names_that_do_not_exist_are_answered_from_the_tables(dataset: str) -> None:
    snap = snapshot(dataset)
    tables = zone_tables.ready(snap, background=False)
    assert tables is not None
    for zone in snap.zones.values():
        wire = bytes(DNSRecord.question(f"r{random.getrandbits(40):x}.{zone.name}").pack())
        got = zone_tables.answer(tables, wire, "udp")
        if "*." + zone.name in zone.nodes:  # a wildcard at the apex: synthesized
            assert got is None or DNSRecord.parse(got).rr
        else:
            assert got is not None and DNSRecord.parse(got).header.rcode == 3, zone.name
            assert got == full_path(snap, wire, "udp")


def received(
    batch: fastloop.Batch, client: socket.socket, server: socket.socket, queries: list[bytes]
) -> None:
    """Every query sent to the batch's socket and taken in (one receive or more)."""
    for wire in queries:
        client.sendto(wire, server.getsockname())
    time.sleep(0.02)
    got = 0
    while got < len(queries):
        got += batch.receive()


def test_the_compiled_walk_sends_the_python_walks_bytes(pair) -> None:
    server, client = pair
    batch = fastloop.Batch(server.fileno(), True, 32)
    rng = random.Random(11)
    for dataset in DATASETS:
        snap = snapshot(dataset)
        tables = zone_tables.ready(snap, background=False)
        assert tables is not None
        counts: dict[bytes, int] = {}
        expected: dict[bytes, int] = {}
        names = names_of(snap)
        for _ in range(examples(60)):
            # a distinct ID each, so every reply finds its query
            queries = {}
            while len(queries) < 32:
                wire = query(rng, rng.choice(names), rng.choice(TYPES))
                queries.setdefault(wire[:2], wire)
            received(batch, client, server, list(queries.values()))
            misses, answered, fallbacks = batch.answer_hits(
                {}, rng, array("q"), None, {}, tables.for_c(counts)
            )
            assert fallbacks == 0
            batch.flush()
            by_python = {
                ident: zone_tables.answer(tables, wire, "udp") for ident, wire in queries.items()
            }
            sent = [reply for reply in by_python.values() if reply is not None]
            assert answered == len(sent) and len(misses) == len(queries) - len(sent)
            for _ in sent:
                reply = client.recv(4096)
                assert reply == by_python[reply[:2]]
                key = count_key(reply)
                expected[key] = expected.get(key, 0) + 1
        assert sum(counts.values()) == sum(expected.values()) > 0
        assert {k[:2] for k in counts} == {k[:2] for k in expected}


SEVERAL_ZONES = {
    "a.yaml": "zone: a.test\nsoa: {mname: ns.a.test., rname: h.a.test., minimum: 30}\n"
    "records:\n  '@': {NS: ns.a.test.}\n  ns: {A: 192.0.2.1}\n  www: {A: 192.0.2.2}\n",
    "sub.yaml": "zone: sub.a.test\nsoa: {mname: ns.sub.a.test., rname: h.sub.a.test., "
    "minimum: 60}\nrecords:\n  '@': {NS: ns.sub.a.test.}\n  ns: {A: 192.0.2.3}\n"
    "  mail: {TXT: sub}\n",
    "b.yaml": "zone: b.test\nsoa: {mname: ns.b.test., rname: h.b.test., minimum: 90}\n"
    "records:\n  '@': {NS: ns.b.test.}\n  ns: {A: 192.0.2.4}\n  www: {AAAA: '2001:db8::4'}\n",
}


def test_several_zones_in_one_batch_each_answer_from_its_own_zone(pair, tmp_path) -> None:
    """Nodes of three zones (one a child of another) name their own zone's templates: a
    batch mixing them gets, from the compiled walk, the full path's bytes for each."""
    server, client = pair
    for name, text in SEVERAL_ZONES.items():
        (tmp_path / name).write_text(text)
    config, _ = load_config(tmp_path)
    snap = compile_snapshot(config, 1, geo=GEO)
    tables = zone_tables.ready(snap, background=False)
    assert tables is not None and len(tables.templates) == 3
    batch = fastloop.Batch(server.fileno(), True, 32)
    rng = random.Random(5)
    names = [f"{label}.{zone}" for zone in ("a.test", "sub.a.test", "b.test")
             for label in ("www", "ns", "mail", "nx1", "x.nx2")]  # fmt: skip
    for _ in range(examples(20)):
        queries: dict[bytes, bytes] = {}
        while len(queries) < 32:
            wire = query(rng, rng.choice(names), rng.choice(["A", "AAAA", "TXT", "SOA"]))
            queries.setdefault(wire[:2], wire)
        expected = {ident: full_path(snap, wire, "udp") for ident, wire in queries.items()}
        received(batch, client, server, list(queries.values()))
        _, answered, _ = batch.answer_hits({}, rng, array("q"), None, {}, tables.for_c({}))
        batch.flush()
        assert answered == len(queries)  # every one of these is the tables'
        for _ in range(answered):
            reply = client.recv(4096)
            assert reply == expected[reply[:2]], DNSRecord.parse(reply)


def test_a_node_the_compiled_walk_cannot_read_goes_to_python(pair) -> None:
    server, client = pair
    batch = fastloop.Batch(server.fileno(), True, 8)
    wire = bytes(DNSRecord.question("www.example.test").pack())
    name = b"\x03www\x07example\x04test\x00"
    good = packed({name: b"dnsZ" + bytes(16)})
    cases: list[tuple[bytes, bytes, dict]] = [
        (packed({name: node}).records, good.slots, templates)
        for node, templates in [
            (b"dnsZ\x00", {}),
            (b"not a node at all", {}),
            (b"dnsZ" + bytes(16), {0: [b""]}),  # a template too short
            (b"dnsZ" + bytes(16), {}),  # templates it names that are not there
            (b"dnsZ" + bytes(16), {0: "not a list"}),
        ]
    ]
    cases += [  # packed tables it cannot read: every offset and length is checked
        (good.records[:-3], good.slots, {0: [b""]}),  # the node cut short
        (good.records[:10], good.slots, {}),  # the name cut short
        (good.records, b"\xff" * len(good.slots), {}),  # slots past the records
        (good.records, good.slots[:-4], {}),  # not a power of two of slots
        (good.records, b"", {}),
        (b"", good.slots, {}),
    ]
    for records, slots, templates in cases:
        client.sendto(wire, server.getsockname())
        time.sleep(0.02)
        assert batch.receive() == 1
        misses, answered, _ = batch.answer_hits(
            {},
            random.Random(1),
            array("q"),
            None,
            {},
            (records, slots, {}, zone_tables.COUNTED_QTYPES, templates),
        )
        assert answered == 0 and len(misses) == 1


def test_random_names_leave_nothing_behind_in_the_cache() -> None:
    snap = snapshot("fast")
    cache = AnswerCache()
    client = Client(ipaddress.ip_address("127.0.0.1"), "udp")
    rng = random.Random(3)
    for _ in range(2000):
        wire = bytes(DNSRecord.question(f"r{rng.getrandbits(40):x}.fast.test").pack())
        reply = cache.answer(wire, client, snap, HEALTHY, rng, 0.0)
        assert reply is not None and DNSRecord.parse(reply).header.rcode == 3
    assert len(cache._entries) < 10 and len(cache.tables("udp")) < 10  # none per name


@pytest.mark.parametrize("dataset", DATASETS)
def test_a_new_serial_patches_the_tables_and_they_answer_as_the_full_path(dataset: str) -> None:
    snap = snapshot(dataset)
    before = zone_tables.ready(snap, background=False)
    assert before is not None
    serials = {name: zone.soa.rdata.times[0] + 17 for name, zone in snap.zones.items()}
    later = with_serials(snap, serials)
    after = zone_tables.ready(later, background=False)
    assert after is not None and after is not before
    assert after.nodes.slots is before.nodes.slots  # patched, not built again
    answers_as_the_full_path(later, after, dataset + "serial")


@pytest.mark.parametrize("dataset", ["rich"])
def test_tables_handed_to_a_new_serial_answer_right_when_the_old_zone_serves_again(
    dataset: str,
) -> None:
    """A zone's tables move to the zone with the new serial (one copy in memory); the
    zone it replaced, served again as it is, patches its own serial back in."""
    snap = snapshot(dataset)
    assert zone_tables.ready(snap, background=False) is not None
    later = with_serials(snap, {name: z.soa.rdata.times[0] + 17 for name, z in snap.zones.items()})
    assert zone_tables.ready(later, background=False) is not None
    again = dataclasses.replace(snap)  # the first zones, served by a new snapshot
    tables = zone_tables.ready(again, background=False)
    assert tables is not None
    answers_as_the_full_path(again, tables, dataset + "again")
    third = with_serials(again, {name: z.soa.rdata.times[0] + 5 for name, z in snap.zones.items()})
    tables = zone_tables.ready(third, background=False)
    assert tables is not None
    answers_as_the_full_path(third, tables, dataset + "third")


def answers_as_the_full_path(snap: Snapshot, tables: zone_tables.Tables, seed: str) -> None:
    rng = random.Random(seed)
    names = names_of(snap)
    answered = 0
    for _ in range(examples(3000)):
        wire = query(
            rng, rng.choice(names), rng.choice(["SOA", "A", "TXT", "MX", "NS", "TYPE65280"])
        )
        got = zone_tables.answer(tables, wire, "udp")
        if got is not None:
            answered += 1
            assert got == full_path(snap, wire, "udp"), DNSRecord.parse(wire)
    assert answered > 0


def mutated(rng: random.Random, wire: bytes) -> bytes:
    """`wire` with a few bytes changed, cut short or lengthened: what a stranger may send."""
    out = bytearray(wire)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if choice < 0.5 and out:
            out[rng.randrange(len(out))] = rng.randrange(256)
        elif choice < 0.7 and out:
            del out[rng.randrange(len(out)) :]
        else:
            out[rng.randrange(len(out) + 1) : 0] = rng.randbytes(rng.randint(1, 8))
    return bytes(out)


def test_mutated_queries_get_the_full_paths_bytes_or_go_to_python(pair) -> None:
    server, client = pair
    batch = fastloop.Batch(server.fileno(), True, 32)
    snap = snapshot("rich")
    tables = zone_tables.ready(snap, background=False)
    assert tables is not None
    rng = random.Random(99)
    names = names_of(snap)
    answered = 0
    for _ in range(examples(100)):
        queries: dict[bytes, bytes] = {}
        while len(queries) < 32:
            wire = mutated(rng, query(rng, rng.choice(names), rng.choice(TYPES)))
            if len(wire) >= 2:
                queries.setdefault(wire[:2], wire)
        expected = {}
        for ident, wire in queries.items():
            got = zone_tables.answer(tables, wire, "udp")
            if got is not None:
                assert got == full_path(snap, wire, "udp"), wire.hex()
                expected[ident] = got
        received(batch, client, server, list(queries.values()))
        _, answered_now, _ = batch.answer_hits({}, rng, array("q"), None, {}, tables.for_c({}))
        batch.flush()
        assert answered_now == len(expected)
        for _ in expected:
            reply = client.recv(4096)
            assert reply == expected[reply[:2]]
        answered += answered_now
    assert answered > 0
