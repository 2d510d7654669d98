"""The main process's health at start: the cluster bus and config sync up, the probes
started, and the wait for their first round before any query is answered."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from dnsd.health.scheduler import ProbeScheduler

if TYPE_CHECKING:
    from dnsd.cluster.bus import RedisBus
    from dnsd.cluster.config_channel import ConfigSync

log = logging.getLogger("dnsd.server")  # one logger for every part of serving


async def start_probing(
    scheduler: ProbeScheduler,
    bus: RedisBus | None,
    config_sync: ConfigSync | None,
    first_round_wait_s: float,
) -> None:
    if config_sync is not None:
        config_sync.start()
    if bus is not None:
        await bus.start()
    await scheduler.start()
    # Answer only once every backend has been probed once (gdnsd's initial round): a
    # restarted server must not send clients to a dead backend it has not looked at yet.
    try:
        async with asyncio.timeout(first_round_wait_s):
            await scheduler.first_round.wait()
    except TimeoutError:
        log.warning(
            "first probe round not complete after %.0fs: serving anyway", first_round_wait_s
        )
