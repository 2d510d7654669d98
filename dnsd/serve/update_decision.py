"""The decision of an RFC 2136 UPDATE (RFC 2136 §3.2-§3.4), pure functions over the
message, the zone as loaded and the `records:` entries being edited: its prerequisites,
the form of its update records against the key's grants, and the edit of the owners'
entries. dnsd.serve.updates does the I/O around it (queueing, the writer, the answer).

Prerequisites (RFC 2136 §2.4) are evaluated against the zone as loaded (the zone file's
records and `records:`); the update (§2.5) edits the `records:` entries of its owners.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.update

from dnsd.config.model import RRset, UpdateGrant, Zone
from dnsd.config.zone_options import NOT_UPDATABLE
from dnsd.rdata import to_dnspython, type_number

MAX_UPDATE_RECORDS: Final = 500  # prerequisite and update records in one UPDATE
ANY, NONE = dns.rdataclass.ANY, dns.rdataclass.NONE
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


def records_by_owner(zone: Zone) -> dict[str, list[RRset]]:
    """The zone's loaded RRsets by owner: made once per batch of UPDATEs, so deciding one
    looks its owners up instead of walking every RRset of the zone (a burst of 1,000 in a
    zone of 100,000 records walked 10⁸)."""
    found: dict[str, list[RRset]] = {}
    for rrset in zone.rrsets:
        found.setdefault(rrset.owner, []).append(rrset)
    return found


def zone_data(
    loaded: Mapping[str, Sequence[RRset]],
    owners: set[str],
    overlay: Mapping[str, Entry] | None = None,
) -> ZoneData:
    """The loaded records of `owners` (dnspython rdatas, compared by their canonical form;
    `loaded`: records_by_owner), with the `records:` entries that earlier UPDATEs of the
    same write (`overlay`) changed."""
    data: ZoneData = {}
    for owner in owners:
        for rrset in loaded.get(owner, ()):
            at = data.setdefault(owner, {}).setdefault(rrset.rtype, set())
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
    loaded: Mapping[str, Sequence[RRset]],
    overlay: Mapping[str, Entry] | None = None,
) -> None:
    """RFC 2136 §3.2: raises Refusal with the rcode of the first prerequisite that fails.
    `loaded`: the zone's records_by_owner."""
    owners = {owner_key(r.name) for r in message.prerequisite}
    data = zone_data(loaded, owners, overlay)
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
    loaded: Mapping[str, Sequence[RRset]],
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
            types = {int(t) for t in zone_data(loaded, {owner}, overlay).get(owner, {})}
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
        wire = b"".join(bytes([len(c)]) + c for c in chunks)
        txt = dns.rdatatype.RdataType.make(rtype)
        return dns.rdata.from_wire(dns.rdataclass.IN, txt, wire, 0, len(wire))
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
        plain = text.isprintable() and text == text.strip() and not text.startswith('"')
        if text and plain and all(len(s) == 255 for s in strings[:-1]):
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
