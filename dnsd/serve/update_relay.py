"""A worker process's UPDATEs (`--workers`): the config writer that applies them lives in
the main process, so a worker passes each UPDATE up its pipe (dnsd.workers) and answers
with the main process's reply — signed there, applied once. The worker keeps at most as
many waiting as the main process would (more are REFUSED at once) and gives up on one
that has no reply in RELAY_TIMEOUT_S (the main process is gone or stuck): SERVFAIL."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Final

from dnslib import RCODE

from dnsd.reply import Client, header_only
from dnsd.serve.updates import MAX_PENDING
from dnsd.workers import Follower

log = logging.getLogger("dnsd.update")
RELAY_TIMEOUT_S: Final = 60.0  # a burst of 1,024 UPDATEs is applied well within this


class UpdateRelay:
    def __init__(self) -> None:
        self._follower: Follower | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[int, asyncio.Future[bytes]] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    def attach(self, follower: Follower) -> None:
        """The worker's pipe, once it follows it (before its ports answer)."""
        self._follower = follower
        self._loop = asyncio.get_running_loop()

    def replied(self, ident: int, reply: bytes) -> None:
        """From the follower's thread: the main process's reply to UPDATE `ident`."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._resolve, ident, reply)

    def _resolve(self, ident: int, reply: bytes) -> None:
        waiting = self._waiting.get(ident)
        if waiting is not None and not waiting.done():
            waiting.set_result(reply)

    def submit(self, wire: bytes, client: Client, respond: Callable[[bytes], object]) -> None:
        """From a UDP loop (on the event loop): answer by `respond` when the reply comes."""

        async def run() -> None:
            reply = await self.answer(wire, client)
            try:
                respond(reply)
            except OSError as exc:
                log.debug("update reply to %s failed: %s", client.address, exc)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def answer(self, wire: bytes, client: Client) -> bytes:
        """From the TCP listener (and `submit`): the main process's reply."""
        follower = self._follower
        if follower is None or len(self._waiting) >= MAX_PENDING or len(wire) < 12:
            return _header(wire, RCODE.REFUSED)
        ident = next(self._ids)
        self._waiting[ident] = asyncio.get_running_loop().create_future()
        try:
            up = (ident, wire, str(client.address), client.transport)
            await asyncio.to_thread(follower.pass_update, up)  # a write may block: not here
            return await asyncio.wait_for(self._waiting[ident], RELAY_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            why = exc or "timed out"
            log.warning(
                "an UPDATE from %s: no answer from the main process: %s", client.address, why
            )
            return _header(wire, RCODE.SERVFAIL)
        finally:
            del self._waiting[ident]


def _header(wire: bytes, rcode: int) -> bytes:
    if len(wire) < 4:
        return b""
    return header_only(int.from_bytes(wire[:2]), int.from_bytes(wire[2:4]), rcode)
