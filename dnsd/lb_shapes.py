"""Load-balancer shapes: which load balancers decide alike but for their backends' addresses.

Two load balancers have the same *shape* when everything a decision reads is the same but
the names of their pools and the addresses of those pools' backends: policy, TTL, pool
count and order (each pool reference becomes its position), every pool's settings and
backend list (names, weights, zones, roles, families), and which of their backends share
an address. How backends are probed (monitor, port) is left out: what it finds is their
health, which the class tag holds. A member's *slots* are its pools' backends in that order; its address vector
holds each slot's address (16 bytes, an IPv4 one in the first 4). A decision one member
made names addresses; mapped to slots it holds for every member of the shape whose slots
are in the same health state (`health_tag`), its addresses put back in (dnsd.lb_classes).
Load balancers that nest others keep a shape of their own.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from dnsd.config.lb_graph import LbGraph
from dnsd.config.model import Config, LoadBalancer, Pool
from dnsd.health.view import HealthView

SLOT_BYTES: Final = 16
MAX_SLOTS: Final = 240  # a tag (4 + pools + slots bytes) fits its one length byte
SHAPE = struct.Struct("<I")
_POOL_STATE: Final = {None: 0, "up": 1, "down": 2}
RR_HEAD: Final = 12  # an answer record before its data: pointer, type, class, TTL, length


@dataclass(frozen=True, slots=True)
class Shape:
    """One load balancer's place in its shape: the shape's id, its pools in reference
    order (its slots: their backends in order), each slot's packed address (b"": a host
    name) and the vector both serving loops read."""

    id: int
    pools: tuple[str, ...]
    addresses: tuple[bytes, ...]
    vector: bytes


def shapes(config: Config, graph: LbGraph) -> dict[str, Shape]:
    """Every load balancer's shape (a whole configuration: O(pools' backends))."""
    ids: dict[tuple[str, ...], int] = {}
    out: dict[str, Shape] = {}
    for name, lb in config.load_balancers.items():
        refs = lb.pool_refs()
        if graph.reach(name).nested:
            key: tuple[str, ...] = ("own", name)  # nests another: decides by its own name
            pools: tuple[Pool, ...] = ()
        else:
            pools = tuple(config.pools[ref] for ref in refs)
            key = _key(lb, refs, pools)
        addresses = tuple(
            b"" if b.address is None else b.address.packed for pool in pools for b in pool.backends
        )
        if len(addresses) + len(pools) > MAX_SLOTS:
            key = ("own", name)
        first: dict[bytes, int] = {}  # which slots share an address: part of the shape
        same = tuple(first.setdefault(a, i) if a else -1 for i, a in enumerate(addresses))
        shape_id = ids.setdefault((*key, repr(same)), len(ids))
        vector = b"".join(a.ljust(SLOT_BYTES, b"\x00") for a in addresses)
        out[name] = Shape(shape_id, tuple(p.name for p in pools), addresses, vector)
    return out


def _key(lb: LoadBalancer, refs: tuple[str, ...], pools: tuple[Pool, ...]) -> tuple[str, ...]:
    at = {ref: f"#{k}" for k, ref in enumerate(refs)}

    def mapped(table: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        return {where: tuple(at[ref] for ref in refs_) for where, refs_ in table.items()}

    parts = [
        _values(
            lb,
            name="",
            default_pools=tuple(at[ref] for ref in lb.default_pools),
            fallback_pool=at[lb.fallback_pool] if lb.fallback_pool else None,
            region_pools=mapped(lb.region_pools),
            country_pools=mapped(lb.country_pools),
            pop_pools=mapped(lb.pop_pools),
            subdivision_pools=mapped(lb.subdivision_pools),
        )
    ]
    for pool in pools:
        backends = [
            _values(
                b, address=0 if b.address is None else b.address.version, port=None, monitor=None
            )
            for b in pool.backends
        ]
        parts.append(_values(pool, name="", file="", monitor=None, backends=tuple(backends)))
    return tuple(parts)


@functools.cache
def _compared(kind: Any) -> tuple[str, ...]:
    """The names of a dataclass's compared fields (a class's fields never change)."""
    return tuple(f.name for f in fields(kind) if f.compare)


def _values(thing: Any, **instead: object) -> str:
    """`thing`'s compared fields as text, those in `instead` replaced (no dataclass made)."""
    return repr(tuple(instead.get(n, getattr(thing, n)) for n in _compared(thing.__class__)))


def health_tag(shape: Shape, health: HealthView, pools: Mapping[str, Pool]) -> bytes:
    """The shape's id, then the health state of each pool and slot as a decision reads it:
    a pool override, and per backend whether it is usable (enabled, not drained) and
    healthy."""
    out = bytearray(SHAPE.pack(shape.id))
    overrides = health.pool_overrides
    for name in shape.pools:
        out.append(_POOL_STATE.get(overrides.get(name), 3))
    for name in shape.pools:
        pool = pools[name]
        for backend in pool.backends:
            out.append(health.usable(pool, backend) * 2 + health.is_healthy(pool, backend))
    return bytes(out)


def addressed(stored: bytes, vector: bytes) -> bytes | None:
    """A stored reply's records (after its header) with each answer's slot number replaced
    by that slot's address from `vector`; None when a slot is not in it."""
    out = bytearray(stored[10:])
    pos = 0
    for _ in range((stored[4] << 8) | stored[5]):
        if pos + RR_HEAD + 4 > len(out):
            return None
        size = (out[pos + 10] << 8) | out[pos + 11]
        at = pos + RR_HEAD
        slot = int.from_bytes(out[at : at + 4], "big")
        if size not in (4, 16) or at + size > len(out) or (slot + 1) * SLOT_BYTES > len(vector):
            return None
        out[at : at + size] = vector[slot * SLOT_BYTES : slot * SLOT_BYTES + size]
        pos = at + size
    return bytes(out)


def slotted(stripped: bytes, addresses: tuple[bytes, ...]) -> bytes | None:
    """A reply stored without its question (`shareable`) with each answer's address
    replaced by its slot's number (the first slot with that address: a shape keeps which
    slots share one), padded to the record's length; None: an address in no slot."""
    out = bytearray(stripped)
    pos = 10
    for _ in range((stripped[4] << 8) | stripped[5]):
        size = (out[pos + 10] << 8) | out[pos + 11]
        at = pos + RR_HEAD
        try:
            slot = addresses.index(bytes(out[at : at + size]))
        except ValueError:
            return None
        out[at : at + size] = slot.to_bytes(4, "big").ljust(size, b"\x00")
        pos = at + size
    return bytes(out)
