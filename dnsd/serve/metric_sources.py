"""What /metrics reads besides the counters the serving loops tally: the served config and
health, the active pools per load balancer, the cockpit (overrides, build, GeoIP age), TCP
and rate limiting, the serving loops, the Redis bus and the answer caches."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dnsd import __version__
from dnsd.admin.active_pool_metrics import ActivePools
from dnsd.admin.control import ServerControl
from dnsd.admin.state_metrics import CockpitCollector, StateCollector
from dnsd.admin.status import (
    all_down_rule,
    answering_pool,
    health_failed_over,
    shared_region_states,
)
from dnsd.fastpath import AnswerCaches
from dnsd.net.rrl import ResponseRateLimiter
from dnsd.net.supervisor import ServingLoops
from dnsd.net.tcp import TcpHandler

if TYPE_CHECKING:  # the redis client is imported only with --redis
    from dnsd.cluster.bus import RedisBus


def register(
    server: ServerControl,
    serving_loop: Callable[[], str],
    tcp_handler: TcpHandler,
    rrl: ResponseRateLimiter,
    loops: ServingLoops,
    bus: RedisBus | None,
    caches: AnswerCaches | None,
) -> None:
    """Into `server.metrics`, in the order /metrics renders them."""
    metrics, holder, store = server.metrics, server.holder, server.store
    active = ActivePools(
        holder,
        store,
        lambda lb, now: shared_region_states(server, lb, now),
        answering_pool,
        health_failed=lambda lb, now: health_failed_over(server, lb, now),
        all_down_rule=all_down_rule,
    )
    metrics.add_text(active.text)
    cockpit = CockpitCollector(holder, store, serving_loop, __version__)
    for collector in (StateCollector(holder, store), cockpit, tcp_handler, rrl, loops):
        metrics.register(collector)
    if bus is not None:
        metrics.register(bus)
    if caches is not None:
        metrics.register(caches)
