"""Validate and build the zone part of a file: `zone`, `ttl`, `soa`, `records` (docs/configuration.md)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import dns.exception
import dns.rdatatype
from dnslib import QTYPE, RD, RR, SOA

from dnsd.config.checker import Checker, join
from dnsd.config.model import Catalog, RRset, Soa, Zone
from dnsd.config.yamlio import LineDict, LineList
from dnsd.config.zone_options import (
    catalog_group,
    dnssec_section,
    notify_targets,
    transfer_section,
    update_grants,
)
from dnsd.config.zonefile import FileRecord, ZoneFileError, read_zone_file
from dnsd.dnsname import is_below_or_at, labels, name_error, parse_name, to_label
from dnsd.errors import Reason
from dnsd.rdata import SIGNER_MANAGED, from_text, from_wire, target, type_number, type_problem
from dnsd.rdata import type_text as rtype_name
from dnsd.reaper import free_in_steps

MAX_TTL = 2**31 - 1
# Record types a zone may hold: every type dnspython knows but the meta types and the
# ones dnsd makes itself (dnsd.rdata.type_problem), plus `TYPEnnn` for any other.
RECORD_TYPES = tuple(
    t.name for t in dns.rdatatype.RdataType if t.value and type_problem(t.value) is None
)
ZONE_KEYS = (
    "zone",
    "ttl",
    "soa",
    "records",
    "file",
    "transfer",
    "notify",
    "dnssec",
    "catalog",
    "catalog_group",
    "update",
)
# A catalog zone's SOA when it has no `soa:` (RFC 9432 §4: its values mean nothing to a
# consumer but the serial; dnsd numbers that itself).
CATALOG_SOA = Soa("invalid.", "invalid.", 1, 3600, 600, 2419200, 0, 0)
SOA_KEYS = ("mname", "rname", "serial", "refresh", "retry", "expire", "minimum", "ttl")


@dataclass(frozen=True, slots=True)
class LbUse:
    """A record owner that names a load balancer (checked against the LB names later)."""

    lb: str
    file: str
    line: int
    path: str


def parse_zone(ck: Checker, doc: LineDict) -> tuple[Zone | None, list[LbUse]]:
    zone_raw = ck.get_str(doc, "zone", "")
    if zone_raw is None:
        return None, []
    try:
        origin = parse_name(str(zone_raw), ".")
    except dns.exception.DNSException as exc:
        ck.error(doc.line_of("zone"), "zone", f"invalid zone name {zone_raw!r}: {name_error(exc)}")
        return None, []
    ttl = ck.get_int(doc, "ttl", "", default=3600, lo=0, hi=MAX_TTL)
    if "catalog" in doc:
        return _catalog_zone(ck, doc, origin, ttl), []
    rrsets: list[RRset] = []
    file_soa: Soa | None = None
    if "file" in doc:
        file_soa, rrsets = _zone_file(ck, doc, origin, ttl)
    soa, serial_auto = _parse_soa(ck, doc, origin, ttl, file_soa)
    records = doc.get("records", LineDict())
    lb_names: dict[str, str] = {}
    lb_uses: list[LbUse] = []
    from_file = {(s.owner, s.rtype) for s in rrsets}
    types_at: dict[str, set[int]] = {}  # owner → its record types so far (no rescans)
    for rrset in rrsets:
        types_at.setdefault(rrset.owner, set()).add(rrset.rtype)
    rmap = ck.mapping(records, doc.line_of("records"), "records")
    if rmap is not None:
        for owner_raw, spec in rmap.items():
            path = join("records", owner_raw)
            line = rmap.line_of(owner_raw)
            try:
                owner = parse_name(str(owner_raw), origin)
            except dns.exception.DNSException as exc:
                ck.error(line, path, f"invalid name: {name_error(exc)}")
                continue
            if "*" in owner and "*" in labels(owner)[1:]:
                ck.error(line, path, "invalid name: '*' may only be the leftmost label")
                continue
            if not is_below_or_at(owner, origin):
                ck.error(line, path, f"name {owner} is outside zone {origin}")
                continue
            node = ck.mapping(spec, line, path)
            if node is None:
                continue
            sets, lb = _parse_owner(ck, node, path, owner, origin, ttl)
            clash = [s.rtype for s in sets if (s.owner, s.rtype) in from_file] if from_file else []
            if lb is not None:
                clash += [t for t in types_at.get(owner, ()) if t in ADDRESS_RTYPES]
            for rtype in clash:
                ck.error(line, path, f"{rtype_name(rtype)} at {owner} is also in the zone file")
            rrsets.extend(sets)
            if sets:  # every set here has this owner
                at = types_at.get(owner)
                if at is None:
                    types_at[owner] = {s.rtype for s in sets}
                else:
                    at.update(s.rtype for s in sets)
            if lb is not None:
                lb_names[owner] = lb
                lb_uses.append(LbUse(lb, ck.file, node.line_of("lb"), join(path, "lb")))
            _check_owner(ck, node.line, path, owner, origin, sets, lb)
    free_in_steps(from_file, types_at)  # not at return, in one C call (dnsd.reaper)
    _check_signed(ck, doc, rrsets)
    if not any(s.rtype == _NS and s.owner == origin for s in rrsets):
        ck.warn(doc.line_of("zone"), "records.@", "the zone apex has no NS records")
    transfer = transfer_section(ck, doc) if "transfer" in doc else None
    notify = notify_targets(ck, doc) if "notify" in doc else ()
    algorithm, split_keys = dnssec_section(ck, doc) if "dnssec" in doc else (None, False)
    group = catalog_group(ck, doc) if "catalog_group" in doc else None
    update = update_grants(ck, doc, origin) if "update" in doc else None
    if soa is None:
        return None, lb_uses
    zone = Zone(
        name=origin,
        file=ck.file,
        ttl=ttl,
        soa=soa,
        rrsets=tuple(rrsets),
        lb_names=MappingProxyType(lb_names),
        serial_auto=serial_auto,
        transfer=transfer,
        notify=notify,
        dnssec_algorithm=algorithm,
        dnssec_split_keys=split_keys,
        catalog_group=group,
        update=update,
    )
    return zone, lb_uses


def _catalog_zone(ck: Checker, doc: LineDict, origin: str, ttl: int) -> Zone | None:
    """A zone with `catalog:`: its records are made from its members once every file is
    read (dnsd.config.catalog); here only its own settings are checked."""
    for key in ("records", "file", "catalog_group"):
        if key in doc:
            ck.error(
                doc.line_of(key),
                key,
                f"a catalog zone has no {key}: dnsd makes its records from its members",
            )
    d = ck.mapping(doc["catalog"], doc.line_of("catalog"), "catalog")
    if d is None:
        return None
    ck.keys(d, "catalog", ("members",), required=("members",))
    raw = d.get("members", "all")
    line = d.line_of("members") if "members" in d else d.line
    members: tuple[str, ...] | None = None
    lines: list[int] = []
    if raw != "all":
        if not isinstance(raw, LineList) or not raw:
            ck.error(line, "catalog.members", "expected all or a list of zone names")
            return None
        names: list[str] = []
        for i, text in enumerate(raw):
            path, item_line = f"catalog.members[{i}]", raw.line_of(i)
            if not isinstance(text, str) or not text:
                ck.error(item_line, path, "expected a zone name")
                continue
            try:
                name = parse_name(text, ".")
            except dns.exception.DNSException as exc:
                ck.error(item_line, path, f"invalid zone name {text!r}: {name_error(exc)}")
                continue
            if name in names:
                ck.error(item_line, path, f"zone {name} is listed twice")
                continue
            names.append(name)
            lines.append(item_line)
        members = tuple(names)
    soa, serial_auto = _parse_soa(ck, doc, origin, ttl, replace(CATALOG_SOA, ttl=ttl))
    transfer = transfer_section(ck, doc) if "transfer" in doc else None
    notify = notify_targets(ck, doc) if "notify" in doc else ()
    algorithm, split_keys = dnssec_section(ck, doc) if "dnssec" in doc else (None, False)
    if soa is None:
        return None
    if "soa" not in doc or "serial" not in doc["soa"]:
        serial_auto = True  # CATALOG_SOA's serial is no floor
    return Zone(
        name=origin,
        file=ck.file,
        ttl=ttl,
        soa=soa,
        rrsets=(),
        lb_names=MappingProxyType({}),
        serial_auto=serial_auto,
        transfer=transfer,
        notify=notify,
        dnssec_algorithm=algorithm,
        dnssec_split_keys=split_keys,
        catalog=Catalog(members, line, tuple(lines)),
    )


ADDRESS_RTYPES = (QTYPE.A, QTYPE.AAAA, QTYPE.CNAME)
# dnslib's QTYPE.X is a Python __getattr__ each time: the numbers, for per-record tests.
_NS, _TXT = int(QTYPE.NS), int(QTYPE.TXT)
_CHECKED_RTYPES = frozenset({5, 2, 43, 39})  # CNAME NS DS DNAME: _check_owner's rules
_LB_EXCLUDES = frozenset({1, 28})  # A AAAA


def _zone_file(ck: Checker, doc: LineDict, origin: str, ttl: int) -> tuple[Soa | None, list[RRset]]:
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
        if isinstance(at, int):  # one RRset: most often nothing _check_owner looks at
            if sets[at].rtype not in _CHECKED_RTYPES:
                continue
            at = [at]
        owned = [sets[i] for i in at]
        _check_owner(fk, first_lines[number], owner, owner, origin, owned, None)
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


def soa_record(zone: Zone) -> RR:
    s = zone.soa
    times = (s.serial, s.refresh, s.retry, s.expire, s.minimum)
    rdata = SOA(to_label(s.mname), to_label(s.rname), times)
    return RR(to_label(zone.name), QTYPE.SOA, ttl=s.ttl, rdata=rdata)


def _parse_soa(
    ck: Checker, doc: LineDict, origin: str, zone_ttl: int, base: Soa | None
) -> tuple[Soa | None, bool]:
    """The `soa` section over the zone file's SOA (`base`), and whether the serial is
    `auto` (the default: dnsd numbers versions itself, see dnsd/xfr/serials.py)."""
    if "soa" not in doc:
        if base is None and "file" not in doc:
            ck.error(doc.line, "soa", 'missing required key "soa"')
        return base, base is None
    d = ck.mapping(doc["soa"], doc.line_of("soa"), "soa")
    if d is None:
        return None, True
    has_file = "file" in doc  # a file that failed to load is reported already
    ck.keys(
        d, "soa", SOA_KEYS, required=("mname", "rname") if base is None and not has_file else ()
    )
    names = {}
    for key in ("mname", "rname"):
        raw = ck.get_str(d, key, "soa", default=None)
        name = getattr(base, key) if base else origin
        if raw:
            try:
                name = parse_name(str(raw), origin)
            except dns.exception.DNSException as exc:
                ck.error(d.line_of(key), f"soa.{key}", f"invalid name: {name_error(exc)}")
        names[key] = name
    u32 = 2**32 - 1
    serial_auto = base is None
    if d.get("serial") == "auto":
        serial_auto = True
        d = LineDict({k: v for k, v in d.items() if k != "serial"})
    elif "serial" in d:
        serial_auto = False

    def number(key: str, default: int, hi: int) -> Any:
        return ck.get_int(
            d, key, "soa", default=getattr(base, key) if base else default, lo=0, hi=hi
        )

    values = {
        "serial": number("serial", 1, u32),
        "refresh": number("refresh", 7200, MAX_TTL),
        "retry": number("retry", 900, MAX_TTL),
        "expire": number("expire", 1209600, MAX_TTL),
        "minimum": number("minimum", 300, MAX_TTL),
        "ttl": number("ttl", zone_ttl, MAX_TTL),
    }
    if any(v is None for v in values.values()):
        return None, serial_auto
    return Soa(mname=names["mname"], rname=names["rname"], **values), serial_auto


def _parse_owner(
    ck: Checker, node: LineDict, path: str, owner: str, origin: str, zone_ttl: int
) -> tuple[list[RRset], str | None]:
    ttl = (
        ck.get_int(node, "ttl", path, default=zone_ttl, lo=0, hi=MAX_TTL)
        if "ttl" in node
        else zone_ttl
    )
    lb = None
    sets: list[RRset] = []
    for key, value in node.items():
        if key == "ttl":
            continue
        if key == "lb":
            lb = ck.get_str(node, "lb", path)
            continue
        rtype = type_number(str(key).upper())
        if rtype is None:
            ck.keys(_single(node, key), path, (*RECORD_TYPES, "lb", "ttl"))
            continue
        line = node.line_of(key)
        problem = type_problem(rtype)
        if problem:
            ck.error(line, join(path, key), f"{key} records cannot be configured: {problem}")
            continue
        if value.__class__ is str:  # one value: the common case
            rdata = _record(ck, rtype, value, origin, line, join(path, key))
            if rdata is not None:
                sets.append(RRset(owner, rtype, ttl, (rdata,)))
            continue
        items = _items(ck, value, line, join(path, key))
        records = []
        for text, item_line, item_path in items:
            rdata = _record(ck, rtype, text, origin, item_line, item_path)
            if rdata is not None:
                records.append(rdata)
        if records:
            sets.append(RRset(owner, rtype, ttl, tuple(records)))
    return sets, lb


def _single(node: LineDict, key: Any) -> LineDict:
    d = LineDict({key: node[key]})
    d.line = node.line
    d.key_lines = {key: node.line_of(key)}
    return d


def _items(ck: Checker, value: Any, line: int, path: str) -> list[tuple[str, int, str]]:
    if isinstance(value, LineList):
        out = []
        for i, item in enumerate(value):
            if isinstance(item, str | int | float) and not isinstance(item, bool):
                out.append((str(item), value.line_of(i), f"{path}[{i}]"))
            else:
                ck.error(value.line_of(i), f"{path}[{i}]", "expected a record value (string)")
        if not value:
            ck.error(line, path, "empty list of records")
        return out
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return [(str(value), line, path)]
    ck.error(line, path, "expected a record value or a list of them")
    return []


def _record(ck: Checker, rtype: int, text: str, origin: str, line: int, path: str) -> RD | None:
    """One record's RDATA (its owner, type and TTL are the RRset's), read by dnspython
    from its presentation form (names relative to the zone; `\\# n hex` for any type)."""
    try:
        if rtype == _TXT and not text.lstrip().startswith('"'):
            # A plain YAML string is one TXT value, its UTF-8 bytes in 255-byte strings.
            data = text.encode()
            chunks = [data[i : i + 255] for i in range(0, len(data), 255)] or [b""]
            return from_wire(rtype, b"".join(bytes([len(c)]) + c for c in chunks))
        return from_text(rtype, text, origin)
    except Exception as exc:  # dnspython raises more than DNSException on hostile text
        ck.error(line, path, f"invalid {rtype_name(rtype)} value {text!r}: {exc}")
        return None


def _check_signed(ck: Checker, doc: LineDict, rrsets: list[RRset]) -> None:
    """A signed zone publishes its own DNSKEY, CDS and CDNSKEY (dnsd.dnssec)."""
    if "dnssec" not in doc:
        return
    for rrset in rrsets:
        if rrset.rtype in SIGNER_MANAGED:
            name = rtype_name(rrset.rtype)
            ck.error(
                doc.line_of("dnssec"),
                "dnssec",
                f"{name} at {rrset.owner}: a signed zone publishes its own {name} records",
            )


def _check_owner(
    ck: Checker,
    line: int,
    path: str,
    owner: str,
    origin: str,
    sets: list[RRset],
    lb: str | None,
) -> None:
    rtypes = {s.rtype for s in sets}
    if not rtypes & _CHECKED_RTYPES and not (lb and rtypes & _LB_EXCLUDES):
        return  # nothing below applies (most names: addresses, TXT, MX)
    types = {rtype_name(t) for t in rtypes}
    if "CNAME" in types:
        cname = next(s for s in sets if s.rtype == QTYPE.CNAME)
        if len(cname.rdatas) > 1:
            ck.error(line, join(path, "CNAME"), "a name can have only one CNAME")
        if len(types) > 1 or lb:
            ck.error(line, path, "CNAME cannot stand beside other records at the same name")
        if owner == origin:
            ck.error(line, path, "CNAME is not allowed at the zone apex")
    if lb and types & {"A", "AAAA"}:
        ck.error(line, path, "a load-balanced name (lb) cannot also have A or AAAA records")
    if owner.startswith("*.") and "NS" in types:
        ck.error(line, path, "a wildcard name cannot hold NS records")
    if owner != origin and "NS" in types and (types - {"NS", "DS"} or lb):
        ck.warn(line, path, "only NS and DS records are served at a delegation point")
    if "DS" in types and (owner == origin or "NS" not in types):
        ck.error(line, path, "DS records belong at a delegation point (beside NS)")
    if "DNAME" in types:
        dname = next(s for s in sets if s.rtype == 39)
        if len(dname.rdatas) > 1:
            ck.error(line, join(path, "DNAME"), "a name can have only one DNAME (RFC 6672 §2.4)")
        if "CNAME" in types or ("NS" in types and owner != origin):
            ck.error(line, path, "DNAME cannot stand beside a CNAME or at a delegation point")
        if target(39, dname.rdatas[0]) == owner:
            ck.error(line, join(path, "DNAME"), "a DNAME may not point at its own name")
