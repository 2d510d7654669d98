"""`file:` — a zone's SOA and records from an RFC 1035 master file next to its YAML
(docs/configuration.md, "Zone files"), each record straight into its RRset."""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

from dnslib import RD

from dnsd.config.checker import Checker
from dnsd.config.model import RRset, Soa
from dnsd.config.owner_rules import CHECKED_RTYPES, check_owner
from dnsd.config.yamlio import LineDict
from dnsd.config.zonefile import FileRecord, ZoneFileError, read_zone_file
from dnsd.dnsname import is_below_or_at
from dnsd.errors import Reason
from dnsd.rdata import from_wire, type_number, type_problem
from dnsd.reaper import free_in_steps


def zone_file(ck: Checker, doc: LineDict, origin: str, ttl: int) -> tuple[Soa | None, list[RRset]]:
    """`file:` — the zone's SOA and records from an RFC 1035 master file next to the YAML.
    Its errors are reported against the zone file and its line."""
    name = ck.get_str(doc, "file", "")
    if name is None:
        return None, []
    directory = Path(ck.file).parent
    path = directory / str(name)
    try:
        found = read_zone_file(path, origin, directory, ttl)
    except ZoneFileError as exc:
        ck.reasons.append(Reason(exc.file, exc.line, "", exc.message))
        return None, []
    fk = Checker(str(path))
    soa: Soa | None = None
    # Each record goes straight into the RRset it belongs to: no list, key or dict entry
    # per record that outlives it, since 100,000s of those freed after the RRsets were
    # made would leave the process's memory full of holes around them (and its RSS high).
    sets: list[RRset] = []  # in the order each (owner, type) first appears
    at_owner: dict[str, int | list[int]] = {}  # owner → the index of its RRset(s) in sets
    first_lines = array("I")  # per owner, in at_owner's order: its first record's line
    grown: dict[int, list[Any]] = {}  # sets index → [ttl, RDATA, ...] of a set of several
    for rec in found:
        where = f"{rec.owner} {rec.rtype}"
        if not is_below_or_at(rec.owner, origin):
            fk.error(rec.line, where, f"name {rec.owner} is outside zone {origin}")
            continue
        if rec.rtype == "SOA":
            if rec.owner != origin:
                fk.error(rec.line, where, "an SOA record may only stand at the zone apex")
            else:
                soa = _file_soa(rec)
            continue
        rtype = type_number(rec.rtype)
        problem = type_problem(rtype) if rtype is not None else "unknown type"
        if rtype is None or problem:
            fk.error(rec.line, where, f"record type {rec.rtype} cannot be configured: {problem}")
            continue
        try:
            rdata = from_wire(rtype, rec.wire)
        except Exception as exc:  # dnslib's wire reader on RDATA dnspython accepted
            fk.error(rec.line, where, f"invalid {rec.rtype} value {rec.text!r}: {exc}")
            continue
        _add_record(sets, at_owner, first_lines, grown, rec, rtype, rdata)
    for index, (ttl, *rdatas) in grown.items():  # the last record's TTL, as written
        grew = sets[index]
        sets[index] = RRset(grew.owner, grew.rtype, ttl, rdatas)
    if soa is None and "soa" not in doc:
        fk.error(0, "", f"no SOA record at {origin} (nor a soa: section in {ck.file})")
    for number, (owner, at) in enumerate(at_owner.items()):
        if isinstance(at, int):  # one RRset: most often nothing check_owner looks at
            if sets[at].rtype not in CHECKED_RTYPES:
                continue
            at = [at]
        owned = [sets[i] for i in at]
        check_owner(fk, first_lines[number], owner, owner, origin, owned, None)
    ck.reasons.extend(fk.reasons)
    # The parse's intermediate tables, emptied here rather than freed at return in one C
    # call that holds the GIL (dnsd.reaper.free_in_steps).
    free_in_steps(found, at_owner, grown)
    return soa, sets


def _add_record(
    sets: list[RRset],
    at_owner: dict[str, int | list[int]],
    first_lines: array[int],
    grown: dict[int, list[Any]],
    rec: FileRecord,
    rtype: int,
    rdata: RD,
) -> None:
    """`rdata` into its owner's RRset of `rtype` (a new one when it has none yet)."""
    owner = rec.owner
    at = at_owner.get(owner)
    if at is not None:
        for index in (at,) if isinstance(at, int) else at:
            if sets[index].rtype == rtype:
                more = grown.get(index)
                if more is None:
                    grown[index] = [rec.ttl, *sets[index].rdatas, rdata]
                else:
                    more[0] = rec.ttl
                    more.append(rdata)
                return
    index = len(sets)
    sets.append(RRset(owner, rtype, rec.ttl, (rdata,)))
    if at is None:
        at_owner[owner] = index
        first_lines.append(rec.line)
    elif isinstance(at, int):
        at_owner[owner] = [at, index]
    else:
        at.append(index)


def _file_soa(rec: FileRecord) -> Soa | None:
    fields = rec.text.split()
    try:
        serial, refresh, retry, expire, minimum = (int(v) for v in fields[2:7])
    except ValueError:
        return None
    mname, rname = fields[0].lower(), fields[1].lower()
    return Soa(mname, rname, serial, refresh, retry, expire, minimum, ttl=rec.ttl)
