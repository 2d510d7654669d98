"""The zone tables' packed nodes: a mapping as a dict of the same items would be."""

from __future__ import annotations

import random

import pytest

from dnsd.zone_tables.packed import packed


def _items(count: int, seed: int) -> dict[bytes, bytes]:
    rng = random.Random(seed)
    out = {}
    for _ in range(count):
        label = b"n%d" % rng.getrandbits(32)
        out[bytes([len(label)]) + label + b"\x04test\x00"] = rng.randbytes(rng.randrange(0, 90))
    return out


@pytest.mark.parametrize("count", [0, 1, 7, 1000])
def test_it_reads_as_the_dict_it_was_packed_from(count: int) -> None:
    items = _items(count, count)
    nodes = packed(items)
    assert len(nodes) == len(items)
    assert dict(nodes.items()) == items and list(nodes) == list(items)
    for key, node in items.items():
        assert nodes.get(key) == node and nodes[key] == node and key in nodes
    for key in _items(50, count + 1):
        assert key not in items and nodes.get(key) is None and key not in nodes
    with pytest.raises(KeyError):
        nodes[b"\x07missing\x00"]


def test_a_later_key_replaces_an_earlier_one() -> None:
    nodes = packed([(b"\x01a\x00", b"first"), (b"\x01b\x00", b"b"), (b"\x01a\x00", b"second")])
    assert dict(nodes.items()) == {b"\x01a\x00": b"second", b"\x01b\x00": b"b"}


def test_a_replacement_keeps_the_slots_and_changes_only_the_nodes() -> None:
    items = {b"\x01a\x00": b"x-OLD-y", b"\x01b\x00": b"plain", b"\x01c\x00": b"OLD"}
    nodes = packed(items)
    after = nodes.with_replaced(b"OLD", b"NEW")
    assert after.slots is nodes.slots
    assert dict(after.items()) == {
        b"\x01a\x00": b"x-NEW-y",
        b"\x01b\x00": b"plain",
        b"\x01c\x00": b"NEW",
    }
    assert dict(nodes.items()) == items  # the first is not changed
    with pytest.raises(ValueError):
        nodes.with_replaced(b"OLD", b"LONGER")
