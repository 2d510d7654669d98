"""RFC 2136 dynamic update with TSIG (RFC 8945): an UPDATE that its zone's `update:` grants
allow becomes one config change through the config API's writer (dnsd.provision.writer):
written to the zone's YAML `records:`, checked, reloaded (the serial rises), a `config`
event with cause `update` and the key's name as actor.

The serving loops only hand the UPDATE over (dnsd.net): parsing, checking, writing and
the answer happen here, on the event loop and its threads. Waiting UPDATEs are decided in
order inside the writer's lock (so between the config API's writes, never across one) and
written together: a burst costs one reload per batch. Nothing here trusts the sender:
an UPDATE is bounded in size and in records, at most MAX_PENDING wait, refusals are
logged at a bounded rate, and a refused UPDATE changes nothing.

Prerequisites (RFC 2136 §2.4) are evaluated against the zone as loaded (the zone file's
records and `records:`); the update (§2.5) edits the `records:` entries of its owners.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import dns.exception
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.update
from prometheus_client.core import CounterMetricFamily

from dnsd.config.model import UpdateGrant, Zone
from dnsd.config.zone_section import NOT_UPDATABLE
from dnsd.events import acting_as
from dnsd.process_tools import start_switching_often, stop_switching_often
from dnsd.provision.edit import ChangeRefused
from dnsd.provision.targets import Change, Target, etag
from dnsd.provision.writer import ConfigWriter
from dnsd.ratelog import RateLimitedLog
from dnsd.rdata import to_dnspython, type_number
from dnsd.reply import Client, header_only
from dnsd.snapshot import SnapshotHolder
from dnsd.xfr import tsig

log = logging.getLogger("dnsd.update")
REFUSAL_LOG = RateLimitedLog(log)
MAX_UPDATE_BYTES: Final = 16_384  # one UPDATE on the wire
MAX_UPDATE_RECORDS: Final = 500  # prerequisite and update records in one UPDATE
MAX_PENDING: Final = 1024  # UPDATEs waiting their turn; more are REFUSED at once
# UPDATEs applied in one write (one check and reload): all that may wait, so a burst costs
# as few reloads as it can (each is Python work beside the serving loops).
MAX_BATCH: Final = MAX_PENDING
# The GIL's switch interval while UPDATEs wait (the usual is 5 ms): a serving loop that
# receives a query waits for the GIL about one interval behind each busy thread.
UPDATE_SWITCH_S: Final = 0.0002
ANY, NONE = dns.rdataclass.ANY, dns.rdataclass.NONE

Respond = Callable[[bytes], object]
# owner (absolute, lower case) → type → its records
ZoneData = dict[str, dict[int, set[dns.rdata.Rdata]]]


class Refusal(Exception):
    """The UPDATE's answer: `rcode`, and why (for the log line)."""

    def __init__(self, rcode: int, why: str) -> None:
        super().__init__(why)
        self.rcode = rcode
        self.why = why


# ---- the decision: pure functions over the message and the zone ---------------------


def owner_key(name: dns.name.Name) -> str:
    return name.to_text().lower()


def relative_labels(owner: str, origin: str) -> tuple[str, ...]:
    """`_acme-challenge.www.example.test.` under `example.test.` → ("_acme-challenge", "www")."""
    if owner == origin:
        return ()
    rest = owner[: -len(origin) - 1] if origin != "." else owner[:-1]
    return tuple(rest.split("."))


def pattern_matches(pattern: tuple[str, ...], name: tuple[str, ...]) -> bool:
    """A grant's name pattern against an owner's labels; `*` is one or more labels."""
    if not pattern:
        return not name
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        return any(pattern_matches(rest, name[i:]) for i in range(1, len(name) - len(rest) + 1))
    return bool(name) and name[0] == head and pattern_matches(rest, name[1:])


def granted(grants: tuple[UpdateGrant, ...], name: tuple[str, ...], rtype: int) -> bool:
    return any(rtype in g.types and any(pattern_matches(p, name) for p in g.names) for g in grants)


def zone_data(zone: Zone, owners: set[str], overlay: Mapping[str, Entry] | None = None) -> ZoneData:
    """The loaded records of `owners` (dnspython rdatas, compared by their canonical form),
    with the `records:` entries that earlier UPDATEs of the same write (`overlay`) changed."""
    data: ZoneData = {}
    for rrset in zone.rrsets:
        if rrset.owner in owners:
            at = data.setdefault(rrset.owner, {}).setdefault(rrset.rtype, set())
            at.update(to_dnspython(rrset.rtype, rd) for rd in rrset.rdatas)
    for owner, entry in (overlay or {}).items():
        if owner in owners:
            types = data.setdefault(owner, {})
            for rtype in entry.original_types | set(entry.types):
                types.pop(rtype, None)
            for rtype, values in entry.types.items():
                types[rtype] = {r for _, r in values}
            if not types:
                del data[owner]
    return data


def check_prerequisites(
    message: dns.update.UpdateMessage,
    zone: Zone,
    origin: str,
    overlay: Mapping[str, Entry] | None = None,
) -> None:
    """RFC 2136 §3.2: raises Refusal with the rcode of the first prerequisite that fails."""
    owners = {owner_key(r.name) for r in message.prerequisite}
    data = zone_data(zone, owners, overlay)
    in_use = set(data) | {o for o in owners if o in zone.lb_names}
    wanted: dict[tuple[str, int], set[dns.rdata.Rdata]] = {}
    for rrset in message.prerequisite:
        owner = owner_key(rrset.name)
        rtype = int(rrset.rdtype)
        if rrset.ttl != 0:
            raise Refusal(dns.rcode.FORMERR, "a prerequisite with a TTL")
        if not (owner == origin or owner.endswith("." + origin) or origin == "."):
            raise Refusal(dns.rcode.NOTZONE, f"prerequisite {owner} outside the zone")
        present = data.get(owner, {})
        if rrset.deleting == ANY:
            if len(rrset):
                raise Refusal(dns.rcode.FORMERR, "a class ANY prerequisite with data")
            if rtype == dns.rdatatype.ANY:
                if owner not in in_use:
                    raise Refusal(dns.rcode.NXDOMAIN, f"prerequisite: {owner} in use")
            elif not present.get(rtype):
                raise Refusal(dns.rcode.NXRRSET, f"prerequisite: {owner} has a {rrset.rdtype.name}")
        elif rrset.deleting == NONE:
            if len(rrset):
                raise Refusal(dns.rcode.FORMERR, "a class NONE prerequisite with data")
            if rtype == dns.rdatatype.ANY:
                if owner in in_use:
                    raise Refusal(dns.rcode.YXDOMAIN, f"prerequisite: {owner} not in use")
            elif present.get(rtype):
                raise Refusal(
                    dns.rcode.YXRRSET, f"prerequisite: {owner} has no {rrset.rdtype.name}"
                )
        elif rrset.rdclass == dns.rdataclass.IN and rtype != dns.rdatatype.ANY:
            wanted.setdefault((owner, rtype), set()).update(rrset)
        else:
            raise Refusal(dns.rcode.FORMERR, "a prerequisite of an unknown form")
    for (owner, rtype), rdatas in wanted.items():  # value-dependent: the exact RRset
        if data.get(owner, {}).get(rtype, set()) != rdatas:
            raise Refusal(dns.rcode.NXRRSET, f"prerequisite: {owner} RRset differs")


def check_updates(
    message: dns.update.UpdateMessage,
    zone: Zone,
    origin: str,
    grants: tuple[UpdateGrant, ...],
    overlay: Mapping[str, Entry] | None = None,
) -> None:
    """RFC 2136 §3.4.1 (the form of each update record) and the key's grant."""
    if len(message.update) > MAX_UPDATE_RECORDS:
        raise Refusal(dns.rcode.REFUSED, "too many update records")
    for rrset in message.update:
        owner = owner_key(rrset.name)
        rtype = int(rrset.rdtype)
        if not (owner == origin or owner.endswith("." + origin) or origin == "."):
            raise Refusal(dns.rcode.NOTZONE, f"update of {owner}: outside the zone")
        meta = dns.rdatatype.is_metatype(rrset.rdtype) and rtype != dns.rdatatype.ANY
        if rrset.deleting is None:
            if rrset.rdclass != dns.rdataclass.IN or rtype == dns.rdatatype.ANY or meta:
                raise Refusal(dns.rcode.FORMERR, f"update of {owner}: not an addable record")
        elif rrset.deleting == ANY:
            if rrset.ttl != 0 or len(rrset) or meta:
                raise Refusal(dns.rcode.FORMERR, f"update of {owner}: a bad delete")
        elif rrset.deleting == NONE:
            if rrset.ttl != 0 or meta or rtype == dns.rdatatype.ANY:
                raise Refusal(dns.rcode.FORMERR, f"update of {owner}: a bad delete")
        else:
            raise Refusal(dns.rcode.FORMERR, f"update of {owner}: an unknown class")
        name = relative_labels(owner, origin)
        if owner in zone.lb_names:
            raise Refusal(dns.rcode.REFUSED, f"{owner} is load-balanced")
        if rtype in NOT_UPDATABLE or (not name and rtype == dns.rdatatype.NS):
            raise Refusal(dns.rcode.REFUSED, f"{rrset.rdtype.name} at {owner} is not updatable")
        if rtype == dns.rdatatype.ANY:  # every RRset at the name: each must be granted
            types = {int(t) for t in zone_data(zone, {owner}, overlay).get(owner, {})}
            refused = [t for t in types if not granted(grants, name, t) or t in NOT_UPDATABLE]
            if refused or (not name and dns.rdatatype.NS in types):
                raise Refusal(dns.rcode.REFUSED, f"delete of all records at {owner}: not granted")
        elif not granted(grants, name, rtype):
            raise Refusal(dns.rcode.REFUSED, f"{rrset.rdtype.name} at {owner}: not granted")


@dataclass
class Entry:
    """One owner's `records:` entry being edited: its other keys kept, each type's values
    as text (unchanged values keep the operator's spelling) with their rdatas."""

    original: Any  # the entry as read (None: no entry yet)
    extra: dict[str, Any] = field(default_factory=dict)  # ttl, lb
    types: dict[int, list[tuple[str, dns.rdata.Rdata]]] = field(default_factory=dict)
    original_types: frozenset[int] = frozenset()
    # The rdatas of `types[t]` as a set, kept beside it once asked for: an add looks a
    # value up in it instead of comparing it with each value there (a burst of UPDATEs
    # adding to one name was quadratic: each comparison renders both rdatas).
    sets: dict[int, set[dns.rdata.Rdata]] = field(default_factory=dict)

    def copy(self) -> Entry:
        types = {t: list(v) for t, v in self.types.items()}
        sets = {t: set(v) for t, v in self.sets.items()}  # no rehashing: the hashes are kept
        return Entry(self.original, dict(self.extra), types, self.original_types, sets)

    def rdatas(self, rtype: int) -> set[dns.rdata.Rdata]:
        if rtype not in self.sets:
            self.sets[rtype] = {r for _, r in self.types.get(rtype, ())}
        return self.sets[rtype]


def read_entry(value: Any, origin: str) -> Entry:
    entry = Entry(value)
    if not isinstance(value, dict):
        return entry
    for key, values in value.items():
        rtype = type_number(str(key).upper()) if key not in ("ttl", "lb") else None
        if rtype is None:
            entry.extra[key] = values
            continue
        items = values if isinstance(values, list) else [values]
        entry.types[int(rtype)] = [(str(v), parse_value(int(rtype), str(v), origin)) for v in items]
    entry.original_types = frozenset(entry.types)
    return entry


def parse_value(rtype: int, text: str, origin: str) -> dns.rdata.Rdata:
    """A `records:` value as dnsd's zone loader reads it (a plain TXT string is one value)."""
    if rtype == dns.rdatatype.TXT and not text.lstrip().startswith('"'):
        data = text.encode()
        chunks = [data[i : i + 255] for i in range(0, len(data), 255)] or [b""]
        return dns.rdata.from_wire(dns.rdataclass.IN, dns.rdatatype.RdataType.make(rtype), b"".join(bytes([len(c)]) + c
                                   for c in chunks), 0, len(data) + len(chunks))  # fmt: skip
    return dns.rdata.from_text(
        dns.rdataclass.IN,
        dns.rdatatype.RdataType.make(rtype),
        text,
        origin=dns.name.from_text(origin),
    )


def apply_updates(
    message: dns.update.UpdateMessage, entries: Mapping[str, Entry], zone_ttl: int
) -> None:
    """RFC 2136 §3.4.2 on the entries, in the order of the update section. A TTL is an
    owner's in `records:` (its entry's `ttl:`): a new owner takes the first added record's,
    an existing one keeps its own."""
    for rrset in message.update:
        entry = entries[owner_key(rrset.name)]
        rtype = int(rrset.rdtype)
        if rrset.deleting is None:  # add to an RRset
            new_owner = entry.original is None and not entry.types
            if new_owner and "ttl" not in entry.extra and rrset.ttl != zone_ttl:
                entry.extra["ttl"] = int(rrset.ttl)
            if rtype == dns.rdatatype.CNAME and any(t != rtype for t in entry.types):
                continue  # RFC 2136 §3.4.2.2: a CNAME beside other data is ignored
            if rtype != dns.rdatatype.CNAME and dns.rdatatype.CNAME in entry.types:
                continue
            values = entry.types.setdefault(rtype, [])
            present = entry.rdatas(rtype)
            for rdata in rrset:
                if rtype == dns.rdatatype.CNAME and values:
                    values.clear()  # a CNAME replaces the one there
                    present.clear()
                if rdata not in present:
                    values.append((value_text(rdata), rdata))
                    present.add(rdata)
        elif rrset.deleting == ANY:
            if rtype == dns.rdatatype.ANY:
                entry.types.clear()
                entry.sets.clear()
            else:
                entry.types.pop(rtype, None)
                entry.sets.pop(rtype, None)
        else:  # NONE: delete these records from the RRset
            values = entry.types.get(rtype, [])
            gone = set(rrset)
            kept = [(t, r) for t, r in values if r not in gone]
            entry.sets.pop(rtype, None)
            if kept:
                entry.types[rtype] = kept
            else:
                entry.types.pop(rtype, None)


def value_text(rdata: dns.rdata.Rdata) -> str:
    """How a new value is written to `records:`: a TXT that reads back the same as a plain
    string is written as one (`token`, not `'"token"'`); else the presentation form."""
    if rdata.rdtype == dns.rdatatype.TXT:
        strings = rdata.strings  # type: ignore[attr-defined]
        try:
            text = b"".join(strings).decode()
        except UnicodeDecodeError:
            text = ""
        if (text and text.isprintable() and text == text.strip() and not text.startswith('"')
                and all(len(s) == 255 for s in strings[:-1])):  # fmt: skip
            return text
    return str(rdata.to_text(origin=None, relativize=False))


def entry_body(entry: Entry) -> dict[str, Any] | None:
    """The entry to write: None deletes it (no records left at the name)."""
    if not entry.types and "lb" not in entry.extra:
        return None
    body: dict[str, Any] = {k: v for k, v in entry.extra.items()}
    for rtype, values in entry.types.items():
        texts = [t for t, _ in values]
        body[dns.rdatatype.to_text(dns.rdatatype.RdataType.make(rtype))] = (
            texts[0] if len(texts) == 1 else texts
        )
    return body


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
        now = time.time()
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
            return header_only(int.from_bytes(wire[:2]), int.from_bytes(wire[2:4]),
                               dns.rcode.FORMERR)  # fmt: skip
        if not isinstance(message, dns.update.UpdateMessage):
            self._count("", dns.rcode.FORMERR)
            return _reply(message, dns.rcode.FORMERR)
        zone_label = ""
        try:
            zone_label = self._served_zone(message)
            key = self._granted_key(message, zone_label)
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.append(Pending(message, key, zone_label, done))
            if self._drainer is None or self._drainer.done():
                self._drainer = asyncio.get_running_loop().create_task(self._drain())
            await done
            rcode: int = dns.rcode.NOERROR
        except Refusal as refusal:
            rcode = refusal.rcode
            self._refused(now, client, f"UPDATE of {zone_label or 'a zone not served'}: "
                          f"{refusal.why}: {dns.rcode.to_text(dns.rcode.Rcode.make(rcode))}")  # fmt: skip
        self._count(zone_label, rcode)
        return _reply(message, rcode)

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
            for item in batch:
                try:
                    await self._decide(item, entries.setdefault(item.origin, {}))
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

    async def _decide(self, item: Pending, overlay: dict[str, Entry]) -> None:
        """One UPDATE on the zone as loaded plus `overlay` (the entries the UPDATEs before
        it in the batch changed); its edits join `overlay` only when it is accepted."""
        message, origin = item.message, item.origin
        current = self._holder.current.zones.get(origin)  # a reload may have come between
        if current is None or current.config.update is None:
            raise Refusal(dns.rcode.REFUSED, "the zone or its update: section went away")
        zone = current.config
        grants = tuple(g for g in current.config.update if g.key == item.key)
        if not grants:
            raise Refusal(dns.rcode.REFUSED, f"key {item.key} is not granted")
        check_prerequisites(message, zone, origin, overlay)
        check_updates(message, zone, origin, grants, overlay)
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
    """The answer, signed with the UPDATE's key when it had one (dnspython's make_response)."""
    response = dns.message.make_response(message)
    response.set_rcode(dns.rcode.Rcode.make(rcode))
    return response.to_wire()


def _refused_header(wire: bytes) -> bytes:
    if len(wire) < 4:
        return b""
    return header_only(int.from_bytes(wire[:2]), int.from_bytes(wire[2:4]), dns.rcode.REFUSED)
