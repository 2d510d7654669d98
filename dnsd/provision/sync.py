"""Config API writes carried to every node through Redis (with `--redis`).

A node that applied a change set for its own client numbers it (INCR `dnsd:config:seq`),
stores each entry's newest state in the hash `dnsd:config:entries` (route → sealed
{route, body, seq, node, at}) and publishes the set on `dnsd:config`. Every other node
checks it (the bus's seal and `--cluster-nodes`), then applies it exactly like an API
write — whole-config check, atomic write, reload — so a node that cannot take it (its
directory differs) logs why, raises the `reload_failed` alert, shows it in the status
API's `config_sync` and keeps serving what it has. A node remembers per entry the number
it last applied (`STATE_DIR/config-sync.json`); after a restart or a lost connection it
reads the hash and applies whatever is newer, so a node that was down catches up.

Concurrent writes to the same entry on two nodes: the higher number wins everywhere (the
ETag check is per node: send one entry's writes to one node, docs/provisioning.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from dnsd.atomic_files import write_file
from dnsd.events.record import SYSTEM, acting_as
from dnsd.health.bus import RedisBus
from dnsd.provision.edit import ChangeRefused
from dnsd.provision.targets import Change, parse_route
from dnsd.provision.writer import ConfigWriter

log = logging.getLogger("dnsd.provision.sync")
SEQ_KEY = "dnsd:config:seq"
ENTRIES_KEY = "dnsd:config:entries"
CHANNEL = "dnsd:config"
STATE_FILE = "config-sync.json"


class ConfigSync:
    channel = CHANNEL

    def __init__(
        self,
        bus: RedisBus,
        writer: ConfigWriter,
        state_dir: Path | None,
        on_refused: Callable[[list[str]], None] = lambda errors: None,
        on_synced: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        self.bus, self.writer = bus, writer
        self.on_refused = on_refused
        self.on_synced = on_synced  # the audit trail: each set applied or refused here
        self._state = state_dir / STATE_FILE if state_dir is not None else None
        self.applied: dict[str, int] = self._load()  # route → the newest number applied here
        self.last_error: str | None = None
        self._unpublished: list[Sequence[Change]] = []
        self._incoming: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        bus.channels.append(self)
        writer.listeners.append(self._local)

    def start(self) -> None:
        self._task = asyncio.create_task(self._apply_loop(), name="config sync")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def status(self) -> dict[str, Any]:
        newest = max(self.applied.values(), default=0)
        return {"config_sync": {"applied_seq": newest, "error": self.last_error}}

    # -- from other nodes -----------------------------------------------------------------
    async def catch_up(self, client: aioredis.Redis) -> None:
        for changes in self._unpublished:  # written here while Redis was away
            await self._publish(changes)
        self._unpublished.clear()
        stored: dict[Any, Any] = await client.hgetall(ENTRIES_KEY)
        entries = []
        for raw in stored.values():
            with self.bus.rejections():
                entries.append(self._entry(self.bus.open_message(raw)))
        self._enqueue(entries)

    def receive(self, raw: str | bytes) -> None:
        with self.bus.rejections():
            message = self.bus.open_message(raw)
            if message["node"] != self.bus.node:
                entries = message.get("entries")
                if not isinstance(entries, list):
                    raise ValueError("a config message without entries")
                self._enqueue([self._entry({**e, "node": message["node"]}) for e in entries])

    @staticmethod
    def _entry(body: dict[str, Any]) -> dict[str, Any]:
        seq, route = body.get("seq"), body.get("route")
        if not isinstance(seq, int) or not isinstance(route, str):
            raise ValueError("a config entry needs seq and route")
        if body.get("body") is not None and not isinstance(body["body"], dict):
            raise ValueError("a config entry's body is an object or null")
        parse_route(route)  # BadTarget is a ValueError: refused like any malformed message
        return body

    def _enqueue(self, entries: list[dict[str, Any]]) -> None:
        newer = [e for e in entries if e["seq"] > self.applied.get(e["route"], 0)]
        if newer:
            self._incoming.put_nowait(newer)

    async def _apply_loop(self) -> None:
        while True:
            entries = await self._incoming.get()
            while not self._incoming.empty():  # whatever else arrived: one change set
                entries.extend(self._incoming.get_nowait())
            await self._apply(entries)

    async def _apply(self, entries: list[dict[str, Any]]) -> None:
        newest: dict[str, dict[str, Any]] = {}
        for entry in sorted(entries, key=lambda e: e["seq"]):
            if entry["seq"] > self.applied.get(entry["route"], 0):
                newest[entry["route"]] = entry
        if not newest:
            return
        ordered = sorted(newest.values(), key=lambda e: e["seq"])
        changes = [Change(parse_route(e["route"]), e.get("body"), missing_ok=True) for e in ordered]
        nodes = ", ".join(sorted({str(e.get("node", "?")) for e in ordered}))[:200]
        try:
            with acting_as(SYSTEM, f"config change from node {nodes}"):
                applied = await self.writer.apply(changes, local=False)
        except ChangeRefused as exc:
            self.last_error = f"{exc}: {'; '.join(exc.errors[:5])}"[:2000]
            await self._audit(ordered, exc.status, None, None, self.last_error)
            log.error("config change from Redis (seq %d..%d) refused here, still serving "
                      "the current config: %s", ordered[0]["seq"], ordered[-1]["seq"],
                      self.last_error)  # fmt: skip
            self.on_refused(exc.errors)
            return
        self.last_error = None
        prepared = applied.prepared
        await self._audit(ordered, 200, prepared.before, prepared.after, None)
        for entry in ordered:
            self.applied[entry["route"]] = entry["seq"]
        await asyncio.to_thread(self._save)
        log.info("applied %d config change(s) from Redis: generation %d",
                     len(changes), applied.generation)  # fmt: skip

    async def _audit(
        self, entries: list[dict[str, Any]], status: int, before: Any, after: Any, error: str | None
    ) -> None:
        if self.on_synced is None:
            return
        nodes = sorted({str(e.get("node", "?")) for e in entries})
        record = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"), "token": None,
            "source": "redis", "origin_node": ", ".join(nodes)[:200], "method": "SYNC",
            "route": entries[0]["route"][:300], "routes": [e["route"] for e in entries[:200]],
            "seq": [entries[0]["seq"], entries[-1]["seq"]], "before": before, "after": after,
            "status": status, **({"error": error[:300]} if error else {}),
        }  # fmt: skip
        await self.on_synced(record)

    # -- from this node ---------------------------------------------------------------------
    def _local(self, changes: Sequence[Change]) -> None:
        asyncio.get_running_loop().create_task(self._publish(changes))

    async def _publish(self, changes: Sequence[Change]) -> None:
        client = self.bus.client
        if client is None:
            self._unpublished.append(changes)
            return
        try:
            seq = int(await client.incr(SEQ_KEY))
            now = time.time()
            entries = [{"route": c.target.route, "body": c.body, "seq": seq} for c in changes]
            async with client.pipeline(transaction=True) as pipe:
                for entry in entries:
                    sealed = self.bus.sealer.seal({**entry, "node": self.bus.node, "at": now})
                    pipe.hset(ENTRIES_KEY, entry["route"], sealed)
                message = {"node": self.bus.node, "at": now, "entries": entries}
                pipe.publish(CHANNEL, self.bus.sealer.seal(message))
                await pipe.execute()
        except (RedisError, OSError) as exc:
            log.warning("config change not yet shared (%s): sent when Redis is back", exc)
            self._unpublished.append(changes)
            return
        for entry in entries:
            self.applied[entry["route"]] = seq
        await asyncio.to_thread(self._save)

    # -- state ------------------------------------------------------------------------------
    def _load(self) -> dict[str, int]:
        if self._state is None or not self._state.exists():
            return {}
        try:
            data = json.loads(self._state.read_text())
            return {str(k): int(v) for k, v in data.get("applied", {}).items()}
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            log.error("%s unreadable (%s): catching up on every shared change", self._state, exc)
            return {}

    def _save(self) -> None:
        if self._state is None:
            return
        write_file(self._state, json.dumps({"applied": self.applied}, sort_keys=True))
