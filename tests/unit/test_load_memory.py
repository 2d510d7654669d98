"""What loading a big zone costs in memory (tracemalloc, deterministic for one Python):
the objects left behind per name, and the peak on the way, whose freed temporaries leave
the serving process's memory full of holes (docs/development.md, "Limits")."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

from dnsd.config.loader import load_config
from dnsd.snapshot import compile_snapshot

RECORDS = 20_000


def _zone(directory: Path) -> Path:
    records = "\n".join(
        f"s{i} 300 IN A 10.{i >> 16}.{(i >> 8) & 255}.{i & 255}" for i in range(RECORDS)
    )
    (directory / "big.zone").write_text(
        "$ORIGIN big.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 900 1209600 300\n"
        f"@ IN NS ns1\nns1 IN A 192.0.2.1\n{records}\n"
    )
    (directory / "big.yaml").write_text("zone: big.test\nfile: big.zone\n")
    return directory


def _traced(call):  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        result = call()
        live, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, live / RECORDS, peak / RECORDS


def test_reading_a_zone_file_peaks_at_little_more_than_twice_what_stays(tmp_path: Path) -> None:
    # A list and a dict per record in the reader's merge, then a list, key and three dict
    # entries per record in the regrouping, made the peak 870 bytes a record (for 260
    # that stay; 214 once an RRset of one record holds it without a tuple).
    directory = _zone(tmp_path)
    load_config(directory)  # imports and caches out of the measure
    (config, _), live, peak = _traced(lambda: load_config(directory))
    assert sum(len(z.rrsets) for z in config.zones) == RECORDS + 2
    assert live <= 240, f"{live:.0f} bytes a record stay"  # 257 with a tuple per RRset
    assert peak <= 720, f"{peak:.0f} bytes a record at the peak (live {live:.0f})"


def test_a_compiled_name_costs_one_node_object(tmp_path: Path) -> None:
    # A Node beside an RRsets mapping per name was 110 bytes a name.
    config, warnings = load_config(_zone(tmp_path))
    snap, live, _ = _traced(lambda: compile_snapshot(config, 1, warnings, "", time.time()))
    assert len(snap.zones["big.test."].nodes) == RECORDS + 2
    assert live <= 85, f"{live:.0f} bytes a name"


def test_a_names_answer_tables_are_packed(tmp_path: Path) -> None:
    # A dict of a bytes key and a bytes node per name was 190 bytes a name.
    from dnsd import zone_tables

    config, warnings = load_config(_zone(tmp_path))
    snap = compile_snapshot(config, 1, warnings, "", time.time())
    tables, live, _ = _traced(lambda: zone_tables.ready(snap, background=False))
    assert tables is not None and len(tables.nodes) > RECORDS
    assert live <= 100, f"{live:.0f} bytes a name"


def test_new_serials_share_the_zones_names(tmp_path: Path) -> None:
    # A copy of the names' mapping per serial change was 37 bytes a name, kept beside the
    # zone as compiled (the next reload reuses that one).
    from dnslib import QTYPE

    from dnsd.snapshot import copied, with_serials

    config, warnings = load_config(_zone(tmp_path))
    snap = compile_snapshot(config, 1, warnings, "", time.time())
    before = snap.zones["big.test."]
    served, _, peak = _traced(lambda: with_serials(snap, {"big.test.": 7}))
    zone = served.zones["big.test."]
    apex = zone.nodes["big.test."]
    assert apex.rrsets[QTYPE.SOA].rdatas[0].times[0] == 7 == zone.soa.rdata.times[0]
    assert before.nodes["big.test."].rrsets[QTYPE.SOA].rdatas[0].times[0] == 1
    assert zone.nodes["s7.big.test."] is before.nodes["s7.big.test."]
    assert len(zone.nodes) == len(before.nodes) and "s7.big.test." in zone.nodes
    assert dict(zone.nodes.items())["big.test."] is apex
    assert copied(zone.nodes)["big.test."] is apex
    assert peak * RECORDS <= 64 * 1024, f"{peak * RECORDS:.0f} bytes for new serials"


def test_a_yaml_file_is_built_without_its_node_graph() -> None:
    # libyaml's node graph (nodes and two marks per value) was composed whole first: the
    # peak was 2.4 times what the document keeps; a mapping's instance dict and empty
    # duplicates list made that 1,030 bytes a record.
    from dnsd.config.yamlio import load_yaml

    text = "zone: big.test\nrecords:\n" + "".join(
        f"  s{i}: {{A: 10.0.{i >> 8 & 255}.{i & 255}}}\n" for i in range(RECORDS)
    )
    load_yaml(text)
    doc, live, peak = _traced(lambda: load_yaml(text))
    assert len(doc["records"]) == RECORDS and doc["records"].line_of("s7") == 10
    assert live <= 700, f"{live:.0f} bytes a record"
    assert peak <= 1.3 * live, f"peak {peak:.0f} bytes a record for {live:.0f} kept"
