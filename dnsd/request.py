"""One query packet and everything answering it reads, built once per packet that the answer
cache cannot finish from its memo: the full path (dnsd.resolve) and the cache's slower
paths (dnsd.fastpath) take this one object instead of the same seven values by hand."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from dnsd.health.view import HealthView
from dnsd.reply import Client
from dnsd.snapshot import Snapshot

# Told of every load-balanced answer: (load balancer, pool that answered, client region,
# whether the fallback pool answered because nothing was healthy — not another
# `when_all_down` rule). Metrics count these.
DecisionObserver = Callable[[str, str | None, str | None, bool], None]


@dataclass(frozen=True, slots=True)
class Request:
    wire: bytes  # the query as received
    client: Client  # who sent it, over which transport
    snap: Snapshot  # the snapshot being served, read once per batch
    health: HealthView  # the health view, read once per batch
    rng: random.Random  # the answering loop's own random source (draws)
    now: float  # the batch's wall clock
    on_decision: DecisionObserver | None = None
