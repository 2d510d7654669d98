"""The zone tables' nodes packed in two buffers: owner name (lower-case wire form) → node.

A dict of bytes keys and bytes values costs ~190 bytes per name (two objects of 33 bytes'
overhead each, the dict's entry and index); packed, ~90 (measured: 10,000 load balancers +
100,000 records, 21 → 10 MiB). Both walks read it: dnsd/_fastloop.c in C, `get` here.

    records   per name: u8 key length, the key, u32 node length (little-endian), the node
    slots     a power of two of slots, at least 1.5 times the names, each two native u32:
              the record's offset + 1 (0: an empty slot) and its key's CRC-32 (zlib's,
              which C computes alike); a name's search starts at slot crc32(key) & (size
              - 1) and goes on one slot at a time, reading only the records whose CRC-32
              is the name's
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Iterator, Mapping
from zlib import crc32

_U32 = struct.Struct("<I")


class PackedNodes(Mapping[bytes, bytes]):
    """Never changed once made; `with_replaced` makes another sharing its slots."""

    __slots__ = ("_count", "_mask", "_slot", "records", "slots")

    def __init__(self, records: bytes, slots: bytes, count: int) -> None:
        self.records, self.slots, self._count = records, slots, count
        self._slot = memoryview(slots).cast("I")
        self._mask = len(self._slot) // 2 - 1

    @classmethod
    def pack(cls, nodes: Mapping[bytes, bytes]) -> PackedNodes:
        size = 8
        while size < 1.5 * len(nodes):
            size *= 2
        mask = size - 1
        slot = array("I", bytes(8 * size))
        parts: list[bytes] = []
        offset = 0
        for key, node in nodes.items():
            hashed = crc32(key)
            at = hashed & mask
            while slot[2 * at]:
                at = (at + 1) & mask
            slot[2 * at] = offset + 1
            slot[2 * at + 1] = hashed
            record = b"%c%s%s%s" % (len(key), key, _U32.pack(len(node)), node)
            parts.append(record)
            offset += len(record)
        return cls(b"".join(parts), slot.tobytes(), len(nodes))

    def get(self, key: bytes, default: bytes | None = None) -> bytes | None:  # type: ignore[override]
        records, slot, mask = self.records, self._slot, self._mask
        hashed = crc32(key)
        at = hashed & mask
        size = len(key)
        while offset := slot[2 * at]:
            offset -= 1
            if (
                slot[2 * at + 1] == hashed
                and records[offset] == size
                and records[offset + 1 : offset + 1 + size] == key
            ):
                start = offset + 5 + size
                return records[start : start + _U32.unpack_from(records, offset + 1 + size)[0]]
            at = (at + 1) & mask
        return default

    def __getitem__(self, key: bytes) -> bytes:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self.get(key) is not None

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[bytes]:
        return (key for key, _ in self.items())

    def items(self) -> Iterator[tuple[bytes, bytes]]:  # type: ignore[override]
        records, offset, end = self.records, 0, len(self.records)
        while offset < end:
            size = records[offset]
            key = records[offset + 1 : offset + 1 + size]
            length = _U32.unpack_from(records, offset + 1 + size)[0]
            start = offset + 5 + size
            yield key, records[start : start + length]
            offset = start + length

    def with_replaced(self, old: bytes, new: bytes) -> PackedNodes:
        """The same names with every `old` in their nodes written as `new` (as long: the
        offsets hold, and the slots are shared)."""
        if len(old) != len(new):
            raise ValueError("a replacement must keep the records' lengths")
        return PackedNodes(self.records.replace(old, new), self.slots, self._count)


def packed(nodes: Mapping[bytes, bytes] | Iterable[tuple[bytes, bytes]]) -> PackedNodes:
    """`nodes` packed (a later key replaces an earlier one, as in a dict)."""
    return PackedNodes.pack(nodes if isinstance(nodes, Mapping) else dict(nodes))
