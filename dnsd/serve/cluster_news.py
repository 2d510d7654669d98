"""The Redis bus of `--redis` (shared health, config sync) opened, and what it and the
config sync tell this node recorded: events for the connection and the sync state, audit
entries for change sets synced from other nodes, a reload_failed for a refused one."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnsd.admin.audit import AuditLog
from dnsd.events import EventLog, current_actor
from dnsd.events.record import SYSTEM, make
from dnsd.health.store import HealthStore
from dnsd.provision.writer import ConfigWriter
from dnsd.snapshot import SnapshotHolder

if TYPE_CHECKING:
    from dnsd.cluster.bus import RedisBus
    from dnsd.cluster.config_channel import ConfigSync

log = logging.getLogger("dnsd.server")  # one logger for every part of serving


def open_bus(
    url: str,
    ca_file: str | None,
    node: str,
    key: bytes | None,
    nodes: frozenset[str] | None,
    max_age_s: float,
    store: HealthStore,
) -> RedisBus:
    """The bus, with this node's health shared on it (the redis client only with --redis:
    16 MiB, hence imported here)."""
    from dnsd.cluster.bus import RedisBus
    from dnsd.cluster.connection import RedisTarget
    from dnsd.cluster.health_channel import HealthChannel

    target = RedisTarget(url, ca_file)
    bus = RedisBus(target, node, key=key, nodes=nodes)
    HealthChannel(bus, store, max_age_s)
    if key is None:
        log.warning(
            "health bus WITHOUT a cluster key (--redis-insecure): whoever can write "
            "to %s can change this node's health and overrides and, through the config "
            "sync, rewrite its configuration files",
            target,
        )
    return bus


class ClusterNews:
    """Events and audit entries for what the bus and the config sync report."""

    def __init__(
        self, bus: RedisBus, events: EventLog, audit: AuditLog, holder: SnapshotHolder
    ) -> None:
        self.bus = bus
        self.events = events
        self.audit = audit
        self.holder = holder

    def config_sync(self, writer: ConfigWriter, state_dir: Path | None) -> ConfigSync:
        """The config sync between nodes, applying through this node's config writer."""
        from dnsd.cluster.config_channel import ConfigSync

        return ConfigSync(
            self.bus,
            writer,
            state_dir,
            self.refused,
            on_synced=self.synced,
            on_state=self.sync_state,
        )

    def connection(self, up: bool) -> None:
        cause = "connected again" if up else "connection lost"
        status = self.bus.status()
        url = str(status["url"]) if status else ""
        self.events.add(make(time.time(), "redis", cause, SYSTEM, connected=up, url=url))

    def sync_state(self, state: str, reason: str | None) -> None:
        self.events.add(
            make(time.time(), "config_sync", reason or state, SYSTEM, state=state, reason=reason)
        )

    async def synced(self, entry: dict[str, Any]) -> None:
        """A change set from another node, applied here or refused: in the audit trail
        with its origin node, within that node's budget (dnsd.admin.audit)."""
        if self.audit.allow(f"sync:{entry['origin_node']}", time.monotonic()):
            await asyncio.to_thread(self.audit.append_or_log, entry)

    def refused(self, errors: list[str]) -> None:
        generation = self.holder.current.generation
        self.events.add(
            make(
                time.time(),
                "reload_failed",
                (errors or ["refused"])[0][:300],
                current_actor(),
                generation=generation,
                errors=errors[:20],
            )
        )
