"""The SOA serials served: decided here from the zone versions (the main process, which
keeps them), or the ones the main process decided (a worker, from its pipe)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView
from dnsd.snapshot import Snapshot, SnapshotHolder, with_serials
from dnsd.workers import Follower
from dnsd.xfr.versions import ZoneVersions


class Serials:
    def __init__(
        self,
        holder: SnapshotHolder,
        store: HealthStore,
        versions: ZoneVersions | None,
        follower: Callable[[], Follower | None],
    ) -> None:
        self.holder = holder
        self.store = store
        self.versions = versions  # None in a worker
        self.follower = follower  # a worker's pipe, once it follows it

    def on_view(self, view: HealthView) -> None:
        """Every health view: a zone whose transferred answers changed gets a new serial."""
        assert self.versions is not None
        current = self.holder.current
        updated = self.versions.update(current, view, time.time())
        if updated is not current:
            self.holder.swap(updated)

    def renew(self) -> None:
        """A new signed version where the signatures changed (a new day, new key states)."""
        self.on_view(self.store.view)

    def stamp(self, snapshot: Snapshot) -> Snapshot:
        """A new snapshot with its serials, served with them from the first query on."""
        if self.versions is not None:
            return self.versions.update(snapshot, self.store.view, time.time())
        follower = self.follower()
        if follower is not None:  # a worker: the main process's serials
            return with_serials(snapshot, follower.serials)
        return snapshot

    def serve(self, serials: dict[str, int]) -> None:
        """A worker: serve the SOA serials the main process decided."""
        self.holder.swap(with_serials(self.holder.current, serials))

    async def flush(self) -> None:
        """The last serials on disk before the process ends (a worker keeps none)."""
        if self.versions is not None:
            await asyncio.to_thread(self.versions.flush)
