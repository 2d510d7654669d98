"""From the modified eligible set to the addresses in the answer (zonal-affinity.md §6).

Backends of the wrong address family are left out first. Up to `max_answers` are chosen
by weighted random order (backend `weight`), or, with `selection: hash`, by weighted
rendezvous hashing of the client's /24 or /56, so one subnet keeps its backend while the
set stays the same and moves as little as possible when it changes. A set with only
host-name backends answers one CNAME.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import random
from bisect import bisect_right
from dataclasses import dataclass

from dnsd.config.model import Backend, LoadBalancer

FAMILIES = {1: ipaddress.IPv4Address, 28: ipaddress.IPv6Address}  # QTYPE A, AAAA


def candidates_for(backends: tuple[Backend, ...], qtype: int) -> list[Backend]:
    """The backends of the asked address family (computed once per plan)."""
    family = FAMILIES.get(qtype, ipaddress.IPv4Address)
    return [b for b in backends if isinstance(b.address, family)]


def pick_answer(
    lb: LoadBalancer,
    backends: tuple[Backend, ...],
    qtype: int,
    subnet: bytes,
    rng: random.Random,
    matching: list[Backend] | None = None,
) -> tuple[tuple[str, ...], str | None]:
    """(addresses, cname): addresses of the asked family, or a CNAME target, or neither.
    `matching` is candidates_for(backends, qtype) when the caller has it already. The
    no-draw and one-draw cases are `pick_draws`'s (the answer cache compiles the same)."""
    picks = pick_draws(lb, backends, qtype, subnet, matching)
    if isinstance(picks, PickDraw):
        return picks.answers[bisect_right(picks.thresholds, rng.random() * picks.scale)]
    if picks is not None:
        return picks
    # Several draws: a weighted random order.
    if matching is None:
        matching = candidates_for(backends, qtype)
    if not matching:
        return (), _ordered(lb, [b for b in backends if b.hostname], subnet, rng)[0].hostname
    if lb.max_answers == 1 and lb.selection == "random":  # only zero weights: uniformly
        return (matching[int(rng.random() * len(matching))].address_text,), None
    chosen = _ordered(lb, matching, subnet, rng)[: lb.max_answers]
    return tuple(b.address_text for b in chosen), None


@dataclass(frozen=True, slots=True)
class PickDraw:
    """`pick_answer`'s single weighted draw as data (see select.compile_draws)."""

    scale: float
    thresholds: tuple[float, ...]
    answers: tuple[tuple[tuple[str, ...], str | None], ...]


def pick_draws(
    lb: LoadBalancer,
    backends: tuple[Backend, ...],
    qtype: int,
    subnet: bytes,
    matching: list[Backend] | None = None,
) -> tuple[tuple[str, ...], str | None] | PickDraw | None:
    """What `pick_answer` would return, without drawing: the answer itself when it takes
    no draw, a PickDraw when it takes exactly one, None when it takes more."""
    if matching is None:
        matching = candidates_for(backends, qtype)
    if not matching:
        hosts = [b for b in backends if b.hostname]
        if not hosts:
            return (), None
        if len(hosts) > 1 and lb.selection != "hash":
            return None
        return (), _ordered(lb, hosts, subnet, _NO_DRAWS)[0].hostname
    if lb.max_answers == 1 and lb.selection == "random" and len(matching) > 1:
        weighted = [b for b in matching if b.weight > 0]
        if not weighted:
            return None
        cumulative, total = [], 0
        for backend in weighted:  # P(i) = w_i / Σw: the first running total above the point
            total += backend.weight
            cumulative.append(float(total))
        answers = [((b.address_text,), None) for b in [*weighted, matching[-1]]]
        return PickDraw(float(total), tuple(cumulative), tuple(answers))
    if len(matching) > 1 and lb.selection != "hash":
        return None
    chosen = _ordered(lb, matching, subnet, _NO_DRAWS)[: lb.max_answers]
    return tuple(b.address_text for b in chosen), None


class _NoDraws(random.Random):
    def random(self) -> float:  # a guard: pick_draws orders without drawing
        raise AssertionError("pick_draws must not draw")


_NO_DRAWS = _NoDraws()


def _ordered(
    lb: LoadBalancer, backends: list[Backend], subnet: bytes, rng: random.Random
) -> list[Backend]:
    if len(backends) == 1:
        return backends
    if lb.selection == "hash":
        return sorted(backends, key=lambda b: _rendezvous(subnet, b), reverse=True)
    # Efraimidis–Spirakis: key u^(1/w) sorts into a weighted random order.
    keyed = [(_weighted_key(rng.random(), b.weight), i) for i, b in enumerate(backends)]
    keyed.sort(reverse=True)
    return [backends[i] for _, i in keyed]


def _weighted_key(u: float, weight: int) -> float:
    if weight <= 0:
        return -1.0 + u * 1e-9  # zero weight: only after every weighted backend
    return u ** (1.0 / weight)


def _rendezvous(subnet: bytes, backend: Backend) -> float:
    digest = hashlib.blake2b(subnet + backend.name.encode(), digest_size=8).digest()
    u = (int.from_bytes(digest, "big") + 1) / (2**64 + 1)  # in (0, 1)
    weight = max(backend.weight, 0) or 1e-9
    return -weight / math.log(u)
