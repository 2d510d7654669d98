"""Config API writes carried to every node as one sealed, ordered history (with `--redis`).

A node that applied a change set for its own client appends it to the Redis stream
`dnsd:config:log` as a sealed record chained to the one before it (`config_log.py`),
atomically (WATCH/MULTI) with the sealed head `dnsd:config:seq` = {seq, digest}, and
publishes it on `dnsd:config`. Every node follows the chain from the digest of the last
record it applied: it applies what follows exactly like an API write — whole-config check,
atomic write, reload — and remembers its history in `STATE_DIR/config-sync.json`
(`sync_state.py`).

Nothing unsealed is trusted: an entry of the stream that is not sealed by the cluster, or
does not link into the chain, or a head that is not the chain's, is counted in
`dnsd_redis_rejected_total`, removed or rewritten, and changes nothing. A Redis that lost
everything (restarted without persistence) or part of it — its end, or its start after
an XTRIM — is re-seeded from the nodes' copies; a node that missed changes catches up; one whose history cannot meet the shared one,
or whose directory refuses a change, says so loudly — `config_sync.state: diverged` in the
status API, the `config_sync` webhook, `dnsd_config_sync_diverged 1` — and keeps serving
its last good config.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from prometheus_client.core import GaugeMetricFamily
from redis.exceptions import RedisError, WatchError

from dnsd.cluster.bus import RedisBus
from dnsd.cluster.config_log import GENESIS, Record, chain, new_record, plan, record_of, restorable
from dnsd.cluster.seal import Rejected
from dnsd.cluster.sync_state import audit_record, load_history, save_history, sync_gauges
from dnsd.events.record import SYSTEM, acting_as
from dnsd.provision.edit import ChangeRefused
from dnsd.provision.targets import Change, parse_route
from dnsd.provision.writer import ConfigWriter
from dnsd.ratelog import RateLimitedLog

log = logging.getLogger("dnsd.cluster.config")
DIVERGED_LOG = RateLimitedLog(log)
LOG_KEY = "dnsd:config:log"
SEQ_KEY = "dnsd:config:seq"
CHANNEL = "dnsd:config"
STATE_FILE = "config-sync.json"
CHECK_S = 1.0  # how often the shared head is compared with ours
RETRY_S = 30.0  # a refused change is tried again this often (or when the history moves)
READ_PAGE = 1000  # stream entries read per command
MAX_RECORD_BYTES = 60 * 1024  # one change set's sealed record (the seal's own limit is 64 KiB)


class ConfigSync:
    channels: tuple[str, ...] = (CHANNEL,)

    def __init__(
        self,
        bus: RedisBus,
        writer: ConfigWriter,
        state_dir: Path | None,
        on_refused: Callable[[list[str]], None] = lambda errors: None,
        on_synced: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        on_state: Callable[[str, str | None], None] = lambda state, reason: None,
    ) -> None:
        self.bus, self.writer = bus, writer
        self.on_refused = on_refused
        self.on_synced = on_synced  # the audit trail: each set applied or refused here
        self.on_state = on_state  # in_sync / diverged, for the webhook
        self._state_file = state_dir / STATE_FILE if state_dir is not None else None
        self.history: list[Record] = load_history(self._state_file)
        self.state = "connecting"
        self.diverged_reason: str | None = None
        self.last_error: str | None = None
        self.shared_seq = 0
        self._pending: list[tuple[Sequence[Change], str]] = []  # (changes, head when written)
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._refused_at: tuple[float, str] | None = None  # (when, shared tail) of a refusal
        self._task: asyncio.Task[None] | None = None
        bus.channels.append(self)
        writer.listeners.append(self._local)

    @property
    def head(self) -> str:
        return self.history[-1].digest if self.history else GENESIS

    @property
    def seq(self) -> int:
        return self.history[-1].seq if self.history else 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._worker(), name="config sync")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def status(self) -> dict[str, Any]:
        return {
            "config_sync": {
                "state": self.state,
                "digest": self.head,
                "seq": self.seq,
                "shared_seq": self.shared_seq,
                "pending": len(self._pending),
                "diverged": self.diverged_reason,
                "error": self.last_error,
            }
        }

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return sync_gauges(self.state, self.seq)

    # -- the bus's hooks ----------------------------------------------------------------------
    async def catch_up(self, client: aioredis.Redis) -> None:
        self._wake.set()  # the worker follows the history; the bus does not wait for it

    def connection(self, up: bool) -> None:
        if not up and self.state != "diverged":
            self.state = "disconnected"  # serving what it has; caught up on reconnect
        self._wake.set()

    async def tick(self, client: aioredis.Redis) -> None:
        return None  # the worker checks on its own clock

    def receive(self, channel: str, raw: str | bytes) -> None:
        with self.bus.rejections():
            record = record_of(self.bus.open_message(raw, newest=None))
            if record.digest != self.head:
                self._wake.set()

    # -- the worker ---------------------------------------------------------------------------
    async def _worker(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), CHECK_S)
            self._wake.clear()
            client = self.bus.client
            if client is None:
                continue
            try:
                async with self._lock:
                    await self._step(client)
            except (RedisError, OSError) as exc:
                # Connected, yet the shared history cannot be read or written: not in step
                # (a timeout, a refused command); said so until a step succeeds again.
                self.bus.errors_total += 1
                self.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
                if self.state in ("in_sync", "connecting"):
                    log.error("config sync STALLED: %s", self.last_error)
                    self.state = "stalled"
                log.debug("config sync: %s", exc)
            except Exception:  # never the end of the sync: logged, tried again
                log.exception("config sync step failed")

    async def _step(self, client: aioredis.Redis) -> None:
        if not await self._head_matches(client):
            await self._follow(client)
        elif self.state != "diverged":
            self._in_sync()
        while self._pending and self.state != "diverged":
            changes, written_on = self._pending[0]
            await self._append_local(client, changes, written_on)
            self._pending.pop(0)

    async def _head_matches(self, client: aioredis.Redis) -> bool:
        """The cheap check: the sealed head and the stream's length are ours."""
        async with client.pipeline(transaction=False) as pipe:
            pipe.get(SEQ_KEY)
            pipe.xlen(LOG_KEY)
            raw_head, length = await pipe.execute()
        if raw_head is None:
            return length == 0 and self.seq == 0
        try:
            head = self.bus.open_message(raw_head, newest=None)
        except Rejected as exc:
            self.bus.reject(exc.reason, f"{SEQ_KEY}: {exc}")
            return False  # _follow rewrites it from the chain
        except (ValueError, TypeError) as exc:
            self.bus.reject("malformed", f"{SEQ_KEY}: {exc}")
            return False
        self.shared_seq = int(head.get("seq", 0))
        return head.get("digest") == self.head and head.get("seq") == self.seq == length

    async def _read_chain(self, client: aioredis.Redis) -> list[Record]:
        """The stream's chain; whatever in it is not a sealed, linked record is refused,
        counted and removed."""
        records: list[tuple[Any, Record]] = []
        bad: list[Any] = []
        start: Any = "-"
        while True:  # pages of READ_PAGE: one XRANGE of a stream stuffed with junk times out
            page: list[Any] = await client.xrange(LOG_KEY, min=start, count=READ_PAGE) or []
            junk: list[Any] = []
            for entry_id, fields in page:
                raw = fields.get(b"record", fields.get("record", b""))
                try:
                    records.append((entry_id, record_of(self.bus.open_message(raw, newest=None))))
                except Rejected as exc:
                    self.bus.reject(exc.reason, f"{LOG_KEY} entry {entry_id!r}: {exc}")
                    junk.append(entry_id)
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    self.bus.reject("malformed", f"{LOG_KEY} entry {entry_id!r}: {exc}")
                    junk.append(entry_id)
            if junk:  # removed page by page, so a stall never has to start over
                await client.xdel(LOG_KEY, *junk)
            if len(page) < READ_PAGE:
                break
            last = page[-1][0]
            start = "(" + (last.decode() if isinstance(last, bytes) else str(last))
            await asyncio.sleep(0)  # the DNS loop runs between pages
        linked, orphans = chain([r for _, r in records])
        orphan_ids = {id(r) for r in orphans}
        for entry_id, record in records:
            if id(record) in orphan_ids:
                self.bus.reject(
                    "replayed",
                    f"{LOG_KEY} entry {entry_id!r}: record {record.seq} "
                    "does not link into the history",
                )
                bad.append(entry_id)
        if bad:
            await client.xdel(LOG_KEY, *bad)
        return linked

    async def _follow(self, client: aioredis.Redis) -> None:
        shared = await self._read_chain(client)
        if shared and shared[0].prev != GENESIS:  # trimmed (XTRIM): the start is missing
            whole = restorable(self.history, shared)
            if whole is not None:
                if not await self._restore(client, shared, whole):
                    self._wake.set()  # the stream moved meanwhile: look again
                    return
                log.warning(
                    "config sync: Redis's history began at seq %d: restored the %d "
                    "record(s) before it from this node's copy",
                    shared[0].seq,
                    len(whole) - len(shared),
                )
                shared = whole
        self.shared_seq = shared[-1].seq if shared else 0
        steps = plan(self.history, shared)
        if steps.diverged is not None:
            self._diverge(steps.diverged)
            return
        if steps.append:  # Redis lost records we have: put them back, as they are
            if not await self._append(client, shared[-1] if shared else None, steps.append):
                self._wake.set()  # another node wrote first: look again
                return
            log.warning(
                "config sync: Redis lacked %d record(s) of the shared history: "
                "re-seeded from this node's copy (seq %d)",
                len(steps.append),
                self.seq,
            )
            shared = [*shared, *steps.append]
        if steps.apply and not await self._apply(steps.apply, shared):
            return
        if steps.reappend:  # ours that Redis never kept, again after what others wrote
            entries = [(c.target.route, c.body) for r in steps.reappend for c in self._changes(r)]
            await self._append_local(
                client, [Change(parse_route(r), b, missing_ok=True) for r, b in entries], None
            )
            return
        await self._write_head(client, shared[-1] if shared else None)
        self._in_sync()

    async def _restore(
        self, client: aioredis.Redis, shared: Sequence[Record], whole: Sequence[Record]
    ) -> bool:
        """Replace the stream (exactly `shared`) by `whole`, atomically with the head;
        False when the stream moved. XDEL and XADD, so the ACL needs nothing more."""
        async with client.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(LOG_KEY)
                entries: list[Any] = await pipe.xrange(LOG_KEY, count=len(shared) + 1) or []
                if len(entries) != len(shared):
                    return False
                pipe.multi()
                pipe.xdel(LOG_KEY, *[entry_id for entry_id, _ in entries])
                for record in whole:
                    pipe.xadd(LOG_KEY, {"record": self.bus.sealer.seal(record.body())})
                last = whole[-1]
                pipe.set(SEQ_KEY, self._sealed_head(last))
                await pipe.execute()
            except WatchError:
                return False
        return True

    def _sealed_head(self, tail: Record) -> str:
        """The chain's head marker: who wrote `tail`, when, its seq and digest."""
        head = {"node": self.bus.node, "at": self.bus.now(), "seq": tail.seq, "digest": tail.digest}
        return self.bus.sealer.seal(head)

    async def _write_head(self, client: aioredis.Redis, tail: Record | None) -> None:
        if tail is not None:
            await client.set(SEQ_KEY, self._sealed_head(tail))

    async def _append(
        self, client: aioredis.Redis, tail: Record | None, records: Sequence[Record]
    ) -> bool:
        """Add records after `tail` atomically with the head; False when the stream moved."""
        expected = tail.digest if tail else GENESIS
        async with client.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(LOG_KEY)
                newest: list[Any] = await pipe.xrevrange(LOG_KEY, count=1) or []
                current = GENESIS
                if newest:
                    raw = newest[0][1].get(b"record", newest[0][1].get("record", b""))
                    try:
                        current = record_of(self.bus.sealer.open(raw)).digest
                    except (Rejected, ValueError, TypeError, AttributeError):
                        current = "?"  # garbage at the tail: the next pass removes it
                if current != expected:
                    return False
                pipe.multi()
                sealed = [self.bus.sealer.seal(r.body()) for r in records]
                for text in sealed:
                    pipe.xadd(LOG_KEY, {"record": text})
                last = records[-1]
                pipe.set(SEQ_KEY, self._sealed_head(last))
                for text in sealed:
                    pipe.publish(CHANNEL, text)
                await pipe.execute()
            except WatchError:
                return False
        self.bus.published_total += len(records)
        return True

    async def _append_local(
        self, client: aioredis.Redis, changes: Sequence[Change], written_on: str | None
    ) -> None:
        """One change set made here (or ours again): after the shared tail, then applied here
        again unless nothing else was applied since it was written."""
        entries = [(c.target.route, c.body) for c in changes]
        for _ in range(20):
            await self._follow_quietly(client)
            if self.state == "diverged":
                self._pending.append((changes, written_on or self.head))
                return
            record = new_record(
                self.history[-1] if self.history else None,
                self.bus.node,
                self.bus.node,
                self.bus.now(),
                entries,
            )
            if len(self.bus.sealer.seal(record.body())) > MAX_RECORD_BYTES:
                log.error(
                    "config change of %d entries too large to share (over %d bytes): "
                    "applied here only",
                    len(entries),
                    MAX_RECORD_BYTES,
                )
                self._diverge("a change set too large to share was applied here only")
                return
            if await self._append(client, self.history[-1] if self.history else None, [record]):
                if written_on != record.prev and not await self._apply([record], None):
                    return
                if written_on == record.prev:
                    self.history.append(record)
                    await asyncio.to_thread(save_history, self._state_file, self.history)
                self.shared_seq = record.seq
                self._in_sync()
                return
        raise ConnectionError("the shared history kept moving: change set not yet shared")

    async def _follow_quietly(self, client: aioredis.Redis) -> None:
        if not await self._head_matches(client):
            await self._follow(client)

    # -- applying -----------------------------------------------------------------------------
    @staticmethod
    def _changes(record: Record) -> list[Change]:
        return [Change(parse_route(route), body, missing_ok=True) for route, body in record.entries]

    async def _apply(self, records: Sequence[Record], shared: Sequence[Record] | None) -> bool:
        """Apply records in order as one change set (the newest state of each entry)."""
        tail = records[-1].digest
        if self._refused_at is not None:
            when, refused_tail = self._refused_at
            if refused_tail == tail and time.monotonic() - when < RETRY_S:
                return False
        newest: dict[str, Change] = {}
        try:
            for record in records:
                for change in self._changes(record):
                    newest.pop(change.target.route, None)  # re-inserted last: order kept
                    newest[change.target.route] = change
        except ValueError as exc:  # a route this version cannot parse: sealed, so ours
            self._diverge(f"record {records[0].seq}: {exc}")
            return False
        origins = sorted({r.origin for r in records})
        try:
            nodes = ", ".join(origins)[:200]
            with acting_as(SYSTEM, f"config change from node {nodes}"):
                applied = await self.writer.apply(list(newest.values()), local=False)
        except ChangeRefused as exc:
            self._refused_at = (time.monotonic(), tail)
            self.last_error = f"{exc}: {'; '.join(exc.errors[:5])}"[:2000]
            log.error(
                "config change from Redis (seq %d..%d) refused here, still serving "
                "the current config: %s",
                records[0].seq,
                records[-1].seq,
                self.last_error,
            )
            self._diverge(
                f"a shared change (seq {records[0].seq}..{records[-1].seq}) was refused here"
            )
            self.on_refused(exc.errors)
            await self._audit(records, origins, exc.status, None, None, self.last_error)
            return False
        self._refused_at = None
        self.last_error = None
        prepared = applied.prepared
        await self._audit(records, origins, 200, prepared.before, prepared.after, None)
        self.history.extend(records)
        await asyncio.to_thread(save_history, self._state_file, self.history)
        log.info(
            "applied %d config record(s) from Redis (seq %d..%d): generation %d",
            len(records),
            records[0].seq,
            records[-1].seq,
            applied.generation,
        )
        return True

    def _diverge(self, reason: str) -> None:
        if self.state != "diverged" or self.diverged_reason != reason:
            log.error(
                "config sync DIVERGED: %s; still serving this node's last good config "
                "(digest %s, seq %d)",
                reason,
                self.head[:16],
                self.seq,
            )
            self.on_state("diverged", reason)
        else:
            DIVERGED_LOG.log(time.time(), logging.ERROR, "config sync still diverged: %s", reason)
        self.state, self.diverged_reason = "diverged", reason

    def _in_sync(self) -> None:
        if self.state == "stalled":
            log.warning(
                "config sync no longer stalled (digest %s, seq %d)", self.head[:16], self.seq
            )
            self.last_error = None
        if self.state == "diverged":
            log.warning(
                "config sync back in step with the cluster (digest %s, seq %d)",
                self.head[:16],
                self.seq,
            )
            self.on_state("in_sync", None)
        self.state, self.diverged_reason = "in_sync", None

    async def _audit(
        self,
        records: Sequence[Record],
        origins: list[str],
        status: int,
        before: Any,
        after: Any,
        error: str | None,
    ) -> None:
        if self.on_synced is not None:
            await self.on_synced(audit_record(records, origins, status, before, after, error))

    # -- from this node -----------------------------------------------------------------------
    def _local(self, changes: Sequence[Change]) -> None:
        self._pending.append((changes, self.head))
        self._wake.set()
