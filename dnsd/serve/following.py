"""A worker process (`--workers`): health views, serials and reloads come from the main
process's pipe, and the worker's query counts go back to the main process's /metrics; its
UPDATEs go up the same pipe (dnsd.serve.update_relay)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from dnsd.admin.metrics import Metrics
from dnsd.net.supervisor import ServingLoops
from dnsd.serve.update_relay import UpdateRelay
from dnsd.workers import Follower

log = logging.getLogger("dnsd.server")  # one logger for every part of serving
REPORT_EVERY_S = 1.0


class Following:
    def __init__(self, fd: int, metrics: Metrics, loops: ServingLoops, relay: UpdateRelay) -> None:
        self.fd = fd
        self.relay = relay
        self.metrics = metrics
        self.loops = loops
        self.follower: Follower | None = None
        self._reporting: asyncio.Task[None] | None = None

    async def start(
        self,
        reload: Callable[[], Awaitable[object]],
        stop: asyncio.Event,
        serve_serials: Callable[[dict[str, int]], None],
        first_view_wait_s: float,
    ) -> Follower:
        """Follow the pipe; wait for the first view a while (then serve anyway)."""
        loop = asyncio.get_running_loop()
        self.follower = Follower(
            self.fd,
            on_reload=lambda _generation: loop.call_soon_threadsafe(
                lambda: asyncio.ensure_future(reload())
            ),
            on_gone=lambda: loop.call_soon_threadsafe(stop.set),
            on_serials=lambda serials: loop.call_soon_threadsafe(serve_serials, serials),
            on_update_reply=self.relay.replied,
        )
        self.relay.attach(self.follower)
        self.follower.start()
        if not await self.follower.wait_first_view(first_view_wait_s):
            log.warning("no health view from the main process yet: serving anyway")
        self._reporting = asyncio.create_task(self._report_counts())
        return self.follower

    async def _report_counts(self) -> None:
        """A worker's query counts go to the main process's /metrics, every second."""
        assert self.follower is not None
        while True:
            await asyncio.sleep(REPORT_EVERY_S)
            counts = {**self.metrics.serving_counts(), "loops": self.loops.report()}
            await asyncio.to_thread(self.follower.report, counts)

    async def stop(self) -> None:
        if self._reporting is not None:
            self._reporting.cancel()
            if self.follower is not None:  # the last counts, so none are lost at a restart
                await asyncio.to_thread(self.follower.report, self.metrics.serving_counts())
