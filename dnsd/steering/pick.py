"""From the modified eligible set to the addresses in the answer (docs/steering.md, zonal affinity).

Backends of the wrong address family are left out first. Up to `max_answers` are chosen
by weighted random order (backend `weight`; weight 0 only when nothing weighted is left),
or, with `selection: hash`, by weighted rendezvous hashing of the client's /24 or /56, so
one subnet keeps its backend while the set stays the same and moves as little as possible
when it changes. A set with only host-name backends answers one CNAME. The random picks
are draw nodes (`draws.py`), made per query by whoever walks the compiled plan.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
from collections.abc import Callable

from dnsd.config.model import Backend, LoadBalancer
from dnsd.steering.draws import Draw, Node, Sample, weighted_draw

FAMILIES = {1: ipaddress.IPv4Address, 28: ipaddress.IPv6Address}  # QTYPE A, AAAA


def candidates_for(backends: tuple[Backend, ...], qtype: int) -> list[Backend]:
    """The backends of the asked address family (computed once per plan)."""
    family = FAMILIES.get(qtype, ipaddress.IPv4Address)
    return [b for b in backends if isinstance(b.address, family)]


Answer = tuple[tuple[str, ...], str | None]  # (addresses, cname)


def answer_node(
    lb: LoadBalancer,
    backends: tuple[Backend, ...],
    matching: list[Backend],
    subnet: bytes,
    leaf: Callable[[Answer], Node],
    owner: object = None,
) -> Node:
    """The answer out of one pool's modified eligible set as draws (`draws.py`): a leaf
    when nothing is drawn (one candidate, hash selection), a `Draw` for one weighted pick,
    a `Sample` for several. `matching` is candidates_for(backends, qtype): addresses of the
    asked family; without any, one CNAME to a host-name backend, or no answer."""
    if not matching:
        hosts = [b for b in backends if b.hostname]
        if not hosts:
            return leaf(((), None))
        if len(hosts) > 1 and lb.selection != "hash":
            return _one_of(hosts, [((), b.hostname) for b in hosts], leaf, owner)
        return leaf(((), hashed(hosts, subnet)[0].hostname))
    if len(matching) == 1 or lb.selection == "hash":
        chosen = hashed(matching, subnet)[: lb.max_answers]
        return leaf((tuple(b.address_text for b in chosen), None))
    if lb.max_answers == 1:
        return _one_of(matching, [((b.address_text,), None) for b in matching], leaf, owner)
    texts = [b.address_text for b in matching]
    return Sample(
        weights=tuple(float(b.weight) for b in matching),
        take=min(lb.max_answers, len(matching)),
        leaf=lambda order: leaf((tuple(texts[i] for i in order), None)),
        owner=owner,
    )


def _one_of(
    backends: list[Backend], answers: list[Answer], leaf: Callable[[Answer], Node], owner: object
) -> Draw:
    scale, thresholds, items = weighted_draw([b.weight for b in backends])
    leaves = {i: leaf(answers[i]) for i in set(items)}
    return Draw(scale, thresholds, tuple(leaves[i] for i in items), "answer", owner)


def hashed(backends: list[Backend], subnet: bytes) -> list[Backend]:
    """Weighted rendezvous order for this subnet (no draws)."""
    if len(backends) == 1:
        return backends
    return sorted(backends, key=lambda b: _rendezvous(subnet, b), reverse=True)


def _rendezvous(subnet: bytes, backend: Backend) -> float:
    digest = hashlib.blake2b(subnet + backend.name.encode(), digest_size=8).digest()
    u = (int.from_bytes(digest, "big") + 1) / (2**64 + 1)  # in (0, 1)
    weight = max(backend.weight, 0) or 1e-9
    return -weight / math.log(u)
