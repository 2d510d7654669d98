"""RFC 2136 dynamic update with TSIG (RFC 8945): an UPDATE that its zone's `update:` grants
allow becomes one config change through the config API's writer (dnsd.provision.writer):
written to the zone's YAML `records:`, checked, reloaded (the serial rises), a `config`
event with cause `update` and the key's name as actor.

The serving loops only hand the UPDATE over (dnsd.net): parsing, checking, writing and
the answer happen here, on the event loop and its threads; what an UPDATE changes is
decided in dnsd.serve.update_decision. Waiting UPDATEs are decided in order inside the
writer's lock (so between the config API's writes, never across one) and written
together: a burst costs one reload per batch. Nothing here trusts the sender: an UPDATE
is bounded in size and in records, at most MAX_PENDING wait, refusals are logged at a
bounded rate, and a refused UPDATE changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.update
from prometheus_client.core import CounterMetricFamily

from dnsd.config.model import RRset, Zone
from dnsd.events import acting_as
from dnsd.process_tools import start_switching_often, stop_switching_often
from dnsd.provision.edit import ChangeRefused
from dnsd.provision.targets import Change, Target, etag
from dnsd.provision.writer import ConfigWriter
from dnsd.ratelog import RateLimitedLog
from dnsd.reply import Client, header_only
from dnsd.serve.update_decision import (
    MAX_UPDATE_RECORDS,
    Entry,
    Refusal,
    apply_updates,
    check_prerequisites,
    check_updates,
    entry_body,
    owner_key,
    read_entry,
    records_by_owner,
    relative_labels,
)
from dnsd.serve.update_pacing import Pacer
from dnsd.snapshot import SnapshotHolder
from dnsd.xfr import tsig

log = logging.getLogger("dnsd.update")
REFUSAL_LOG = RateLimitedLog(log)
MAX_UPDATE_BYTES: Final = 16_384  # one UPDATE on the wire
MAX_PENDING: Final = 1024  # UPDATEs waiting their turn; more are REFUSED at once
# UPDATEs applied in one write (one check and reload): all that may wait, so a burst costs
# as few reloads as it can (each is Python work beside the serving loops).
MAX_BATCH: Final = MAX_PENDING
# The GIL's switch interval while UPDATEs wait (the usual is 5 ms): a serving loop that
# receives a query waits for the GIL about one interval behind each busy thread.
UPDATE_SWITCH_S: Final = 0.0002

Respond = Callable[[bytes], object]

# ---- the service: I/O around the decision -------------------------------------------


class UpdateService:
    def __init__(self, holder: SnapshotHolder, writer: ConfigWriter) -> None:
        self._holder = holder
        self._writer = writer
        # UPDATEs wait here; one drainer applies them in order, in batches (so they are
        # serialized among themselves; the writer's lock orders them with the API's writes).
        self._queue: list[Pending] = []
        self._drainer: asyncio.Task[None] | None = None
        self.pending = 0
        self._pacer = Pacer()  # a burst's work in turns, the GIL free between them
        self.counts: dict[tuple[str, str], int] = {}  # (zone, rcode) → UPDATEs answered

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "dnsd_updates", "RFC 2136 UPDATEs answered, by zone and rcode", labels=["zone", "rcode"]
        )
        for (zone, rcode), count in sorted(self.counts.items()):
            family.add_metric([zone, rcode], count)
        yield family

    def _waiting(self, change: int) -> None:
        """One more UPDATE waits (1) or one less (-1). While any wait, the interpreter hands
        the GIL on more often: deciding, checking and loading a burst is seconds of Python
        beside the serving loops, which would otherwise wait up to 5 ms for the GIL after
        each receive (measured: cached answers' p99 at 16-55 ms during 1,000 UPDATEs)."""
        self.pending += change
        if change > 0 and self.pending == 1:
            start_switching_often(UPDATE_SWITCH_S)
        elif change < 0 and self.pending == 0:
            stop_switching_often(UPDATE_SWITCH_S)

    def submit(self, wire: bytes, client: Client, respond: Respond) -> None:
        """From a UDP loop (on the event loop): answer when applied, by `respond`."""
        if self.pending >= MAX_PENDING:
            respond(_refused_header(wire))
            return
        self._waiting(1)  # counted before the task runs: a burst cannot pass the cap

        async def run() -> None:
            try:
                reply = await self._answer(wire, client)
            finally:
                self._waiting(-1)
            try:
                respond(reply)
            except OSError as exc:
                log.debug("update reply to %s failed: %s", client.address, exc)

        task = asyncio.get_running_loop().create_task(run())
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)

    async def answer(self, wire: bytes, client: Client) -> bytes:
        """From the TCP listener: the reply."""
        if self.pending >= MAX_PENDING:
            return _refused_header(wire)
        self._waiting(1)
        try:
            return await self._answer(wire, client)
        finally:
            self._waiting(-1)

    async def _answer(self, wire: bytes, client: Client) -> bytes:
        await self._pacer.turn()  # a burst's work in turns (dnsd.serve.update_pacing)
        with self._pacer.timed():
            now = time.time()
            taken = self._take(wire, client, now)
        if isinstance(taken, bytes):
            return taken
        try:
            await taken.done
            rcode: int = dns.rcode.NOERROR
        except Refusal as refusal:
            rcode = refusal.rcode
            self._refused(now, client, f"UPDATE of {taken.origin}: {refusal.why}: {_text(rcode)}")
        await self._pacer.turn()
        with self._pacer.timed():
            self._count(taken.origin, rcode)
            return _reply(taken.message, rcode)

    def _take(self, wire: bytes, client: Client, now: float) -> bytes | Pending:
        """The UPDATE checked (size, TSIG, zone, key) and queued; or the answer refusing it."""
        if len(wire) > MAX_UPDATE_BYTES:
            self._count("", dns.rcode.REFUSED)
            self._refused(now, client, f"an UPDATE of {len(wire)} bytes: REFUSED")
            return _refused_header(wire)
        try:
            message = tsig.check(wire, self._holder.current.tsig_keyring, now)
        except tsig.TsigFailure as failure:
            self._count("", dns.rcode.NOTAUTH)
            self._refused(now, client, f"UPDATE: {failure.describe()}: NOTAUTH")
            return failure.reply
        except Exception:
            self._count("", dns.rcode.FORMERR)
            return header_only(wire_id(wire), int.from_bytes(wire[2:4]), dns.rcode.FORMERR)
        if not isinstance(message, dns.update.UpdateMessage):
            self._count("", dns.rcode.FORMERR)
            return _reply(message, dns.rcode.FORMERR)
        zone_label = ""
        try:
            zone_label = self._served_zone(message)
            key = self._granted_key(message, zone_label)
        except Refusal as refusal:
            where = zone_label or "a zone not served"
            self._refused(now, client, f"UPDATE of {where}: {refusal.why}: {_text(refusal.rcode)}")
            self._count(zone_label, refusal.rcode)
            return _reply(message, refusal.rcode)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending = Pending(message, key, zone_label, done)
        self._queue.append(pending)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return pending

    def _served_zone(self, message: dns.update.UpdateMessage) -> str:
        """The zone of the UPDATE (absolute, lower case) when it is served here."""
        if len(message.zone) != 1 or message.zone[0].rdtype != dns.rdatatype.SOA:
            raise Refusal(dns.rcode.FORMERR, "the zone section is not one SOA question")
        origin = owner_key(message.zone[0].name)
        compiled = self._holder.current.zones.get(origin)
        if compiled is None or message.zone[0].rdclass != dns.rdataclass.IN:
            raise Refusal(dns.rcode.NOTAUTH, f"{origin[:100]} is not a zone here")
        return origin

    def _granted_key(self, message: dns.update.UpdateMessage, origin: str) -> str:
        """The TSIG key's name when the zone's `update:` grants it anything."""
        if len(message.prerequisite) + len(message.update) > MAX_UPDATE_RECORDS:
            raise Refusal(dns.rcode.REFUSED, "too many records")
        zone = self._holder.current.zones[origin].config
        key = tsig.key_name(message.keyring) if message.had_tsig else None
        if key is None:
            raise Refusal(dns.rcode.REFUSED, "no TSIG")
        if zone.update is None:
            raise Refusal(dns.rcode.REFUSED, "the zone has no update: section")
        if not any(g.key == key for g in zone.update):
            raise Refusal(dns.rcode.REFUSED, f"key {key} is not granted")
        return key

    async def _drain(self) -> None:
        """Apply the queued UPDATEs, as many as wait (up to MAX_BATCH) in one write: a
        burst costs one reload per batch, not one per UPDATE."""
        while self._queue:
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            try:
                await self._apply_batch(batch)
            except Exception:  # a bug: these UPDATEs fail, the service goes on
                log.exception("applying %d UPDATE(s) failed", len(batch))
                _finish(batch, [Refusal(dns.rcode.SERVFAIL, "internal error")] * len(batch))

    async def _apply_batch(self, batch: list[Pending]) -> None:
        """Inside the writer's lock (no config API write comes between): each UPDATE
        decided in order on the zone as loaded plus the UPDATEs before it (each all or
        nothing), the accepted ones written together. When the write does not load, the
        batch is tried in halves, in order, until an UPDATE that does not load is alone: a
        few more reloads for one bad UPDATE among a thousand, not a thousand."""
        outcome: list[Refusal | None] = []

        async def decide() -> list[Change]:
            entries: dict[str, dict[str, Entry]] = {}  # zone → owner → its entry
            loaded: dict[str, tuple[Zone, dict[str, list[RRset]]]] = {}  # zone → its records
            for item in batch:
                try:
                    await self._pacer.turn()
                    with self._pacer.timed():
                        await self._decide(item, entries.setdefault(item.origin, {}), loaded)
                    outcome.append(None)
                except Refusal as refusal:
                    outcome.append(refusal)
            return _changes(entries)  # none: no write, no new serial (RFC 2136 §3.4.2.7)

        try:
            with acting_as(", ".join(sorted({item.key for item in batch})), "update"):
                await self._writer.apply_decided(decide)
        except ChangeRefused as exc:
            if len(batch) > 1:  # one of them does not load: the first half, then the rest
                half = len(batch) // 2
                await self._apply_batch(batch[:half])
                await self._apply_batch(batch[half:])
                return
            detail = "; ".join(str(e) for e in exc.errors[:3]) or str(exc)
            refused = Refusal(dns.rcode.REFUSED, f"the change does not load: {detail}")
            _finish(batch, [o or refused for o in outcome] or [refused])
            return
        _finish(batch, outcome)

    async def _decide(
        self,
        item: Pending,
        overlay: dict[str, Entry],
        loaded: dict[str, tuple[Zone, dict[str, list[RRset]]]],
    ) -> None:
        """One UPDATE on the zone as loaded plus `overlay` (the entries the UPDATEs before
        it in the batch changed); its edits join `overlay` only when it is accepted.
        `loaded`: each zone's records by owner, made once per batch (and again if a reload
        came between)."""
        message, origin = item.message, item.origin
        current = self._holder.current.zones.get(origin)  # a reload may have come between
        if current is None or current.config.update is None:
            raise Refusal(dns.rcode.REFUSED, "the zone or its update: section went away")
        zone = current.config
        grants = tuple(g for g in current.config.update if g.key == item.key)
        if not grants:
            raise Refusal(dns.rcode.REFUSED, f"key {item.key} is not granted")
        if origin not in loaded or loaded[origin][0] is not zone:
            loaded[origin] = (zone, records_by_owner(zone))
        records = loaded[origin][1]
        check_prerequisites(message, zone, origin, records, overlay)
        check_updates(message, zone, origin, grants, records, overlay)
        zone_name = origin.rstrip(".") or "."
        work: dict[str, Entry] = {}
        for rrset in message.update:
            owner = owner_key(rrset.name)
            if owner in work:
                continue
            if owner in overlay:
                work[owner] = overlay[owner].copy()
            else:
                target = Target("record", (zone_name, _relative(owner, origin)))
                work[owner] = read_entry(await self._writer.read(target), origin)
        apply_updates(message, work, zone.ttl)
        overlay.update(work)

    def _count(self, zone: str, rcode: int) -> None:
        key = (
            zone.rstrip(".") or ("." if zone else ""),
            dns.rcode.to_text(dns.rcode.Rcode.make(rcode)),
        )
        self.counts[key] = self.counts.get(key, 0) + 1

    @staticmethod
    def _refused(now: float, client: Client, what: str) -> None:
        REFUSAL_LOG.log(now, logging.WARNING, "%s (from %s)", what, client.address)


_tasks: set[asyncio.Task[None]] = set()  # UDP UPDATEs being applied (kept from the GC)


@dataclass
class Pending:
    """An UPDATE waiting to be applied: its answer is `done` (a Refusal, or None)."""

    message: dns.update.UpdateMessage
    key: str
    origin: str
    done: asyncio.Future[None]


def _finish(batch: list[Pending], outcome: list[Refusal | None]) -> None:
    for item, refusal in zip(batch, outcome, strict=True):
        if item.done.done():
            continue
        if refusal is None:
            item.done.set_result(None)
        else:
            item.done.set_exception(refusal)


def _changes(entries: Mapping[str, Mapping[str, Entry]]) -> list[Change]:
    """The `records:` entries to write: those whose content the batch changed."""
    changes = []
    for origin, owners in entries.items():
        zone_name = origin.rstrip(".") or "."
        for owner, entry in owners.items():
            body = entry_body(entry)
            if body == entry.original or (body is None and entry.original is None):
                continue
            target = Target("record", (zone_name, _relative(owner, origin)))
            changes.append(Change(target, body, etag(entry.original), missing_ok=True))
    return changes


def _relative(owner: str, origin: str) -> str:
    name = relative_labels(owner, origin)
    return ".".join(name) if name else "@"


def _reply(message: dns.message.Message, rcode: int) -> bytes:
    """The answer, signed with the UPDATE's key when it had one: written directly when it
    can be (tsig.signed_reply), else by dnspython's make_response."""
    signed = tsig.signed_reply(message, rcode, time.time())
    if signed is not None:
        return signed
    response = dns.message.make_response(message)
    response.set_rcode(dns.rcode.Rcode.make(rcode))
    return response.to_wire()


def _text(rcode: int) -> str:
    return str(dns.rcode.to_text(dns.rcode.Rcode.make(rcode)))


def wire_id(wire: bytes) -> int:
    return int.from_bytes(wire[:2])


def _refused_header(wire: bytes) -> bytes:
    if len(wire) < 4:
        return b""
    return header_only(int.from_bytes(wire[:2]), int.from_bytes(wire[2:4]), dns.rcode.REFUSED)
