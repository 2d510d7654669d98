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

import struct
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from dnsd.config.model import Config, LoadBalancer, Pool
from dnsd.config.pool_refs import names_lb
from dnsd.health.view import HealthView

SLOT_BYTES: Final = 16
MAX_SLOTS: Final = 240  # a tag (4 + pools + slots bytes) fits its one length byte
SHAPE = struct.Struct("<I")
_POOL_STATE: Final = {None: 0, "up": 1, "down": 2}


@dataclass(frozen=True, slots=True)
class Shape:
    """One load balancer's place in its shape: the shape's id, its pools in reference
    order (its slots: their backends in order), each slot's packed address (b"": a host
    name) and the vector both serving loops read."""

    id: int
    pools: tuple[str, ...]
    addresses: tuple[bytes, ...]
    vector: bytes


def shapes(config: Config) -> dict[str, Shape]:
    """Every load balancer's shape (a whole configuration: O(pools' backends))."""
    ids: dict[tuple[str, ...], int] = {}
    out: dict[str, Shape] = {}
    for name, lb in config.load_balancers.items():
        refs = lb.pool_refs()
        if any(names_lb(ref) or ref not in config.pools for ref in refs):
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

    positional = replace(
        lb,
        name="",
        default_pools=tuple(at[ref] for ref in lb.default_pools),
        fallback_pool=at[lb.fallback_pool] if lb.fallback_pool else None,
        region_pools=mapped(lb.region_pools),
        country_pools=mapped(lb.country_pools),
        pop_pools=mapped(lb.pop_pools),
        subdivision_pools=mapped(lb.subdivision_pools),
    )
    parts = [repr(positional)]
    for pool in pools:
        backends = tuple(
            (
                replace(b, address=None, address_text="", port=None, monitor=None),
                0 if b.address is None else b.address.version,
            )
            for b in pool.backends
        )
        parts.append(repr((replace(pool, name="", file="", monitor=None, backends=()), backends)))
    return tuple(parts)


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
