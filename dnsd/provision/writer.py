"""Config writes in a running server: one at a time, checked, written, reloaded.

The lock makes "compare the ETag, write" one step, so of two writers racing on one entry
with the same If-Match exactly one wins and the other gets 412. When the reload fails
after all (a DNSSEC key that cannot be read, say), the files are put back as they were
and reloaded again, so a refused change leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnsd.config.loader import ParseCache
from dnsd.config.zonefile import LoadCancelled
from dnsd.process_tools import in_daemon_thread
from dnsd.provision.directory import Prepared, prepare, read_all, write_texts
from dnsd.provision.edit import ChangeRefused
from dnsd.provision.reader import ConfigReader
from dnsd.provision.targets import Change, Target
from dnsd.reload_result import ReloadResult

log = logging.getLogger("dnsd.provision")


@dataclass(frozen=True, slots=True)
class Applied:
    prepared: Prepared
    generation: int


class ConfigWriter:
    def __init__(
        self,
        directory: Path,
        reload: Callable[[], Awaitable[ReloadResult]],
        cancelled: Callable[[], bool] | None = None,
        parse_cache: ParseCache | None = None,
    ) -> None:
        self.directory = directory
        # The loader's results of the served config's files (the server's reloads keep it):
        # a check reuses those of the files a change does not touch.
        self._parse_cache = parse_cache
        self._reload = reload
        self._cancelled = cancelled  # the server is stopping: a check in progress gives up
        self._lock = asyncio.Lock()
        self.reader = ConfigReader(directory)  # reads: parsed once per file version
        # Called with each change set this node applied for its own clients (not with
        # sets that came from other nodes): the Redis sync publishes them.
        self.listeners: list[Callable[[Sequence[Change]], None]] = []

    async def read(self, target: Target) -> Any:
        return await self.reader.read(target)

    async def read_all(self) -> dict[str, Any]:
        return await asyncio.to_thread(read_all, self.directory)

    async def apply(
        self,
        changes: Sequence[Change],
        local: bool = True,
        before_write: Callable[[Prepared], Awaitable[None]] | None = None,
    ) -> Applied:
        """Check, write and reload; ChangeRefused (nothing changed) otherwise.
        `before_write`: called with the checked change before anything is written (the
        audit trail reserves room for its entry there); ChangeRefused from it stops it."""
        if not changes:
            raise ChangeRefused(400, "no changes")
        async with self._lock:
            applied = await self._apply_locked(changes, before_write)
        if local:
            for listener in self.listeners:
                listener(changes)
        return applied

    async def apply_decided(
        self, decide: Callable[[], Awaitable[Sequence[Change]]]
    ) -> Applied | None:
        """Like apply, with the changes decided inside the lock, on what is loaded then
        (an RFC 2136 UPDATE's prerequisites): no other write comes between the decision
        and the write. None when `decide` finds nothing to change."""
        async with self._lock:
            changes = await decide()
            if not changes:
                return None
            applied = await self._apply_locked(changes, None)
        for listener in self.listeners:
            listener(changes)
        return applied

    async def _apply_locked(
        self,
        changes: Sequence[Change],
        before_write: Callable[[Prepared], Awaitable[None]] | None,
    ) -> Applied:
        # What is already known of the files: the reads' parsed copies and the last load's
        # results; the check parses and validates only what it has to (the files the change
        # edits, and those it could be about that nothing knows yet).
        known = self.reader.known()
        cache = self._parse_cache.copy() if self._parse_cache is not None else None
        try:  # a daemon thread: checking a big directory does not hold up a SIGTERM
            prepared = await in_daemon_thread(
                prepare, self.directory, changes, self._cancelled, known, cache
            )
        except LoadCancelled:
            raise ChangeRefused(503, "the server is stopping: nothing changed") from None
        if before_write is not None:
            await before_write(prepared)
        await asyncio.to_thread(write_texts, self.directory, prepared.new_texts)
        if cache is not None and self._parse_cache is not None:
            # The check's results of the new texts: the reload does not parse them again
            # (keyed by digest, so a text that is not on disk any more is not used).
            for name in prepared.new_texts:
                if name in cache.files:
                    self._parse_cache.files[name] = cache.files[name]
        result = await self._reload()
        if not result.ok:
            await asyncio.to_thread(write_texts, self.directory, prepared.old_texts)
            await self._reload()
            raise ChangeRefused(
                400, "the server could not load the change: nothing changed", result.errors
            )
        routes = ", ".join(c.target.route for c in changes[:5])
        log.info(
            "config changed (%s%s): generation %d",
            routes,
            ", …" if len(changes) > 5 else "",
            result.generation,
        )
        return Applied(prepared, result.generation)
