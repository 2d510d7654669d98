"""Validate and build the zone part of a file: `zone`, `ttl`, `soa`, `records` (docs/configuration.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import dns.exception
import dns.rdatatype
from dnslib import QTYPE, RD, RR, SOA

from dnsd.config.checker import Checker, join
from dnsd.config.model import Catalog, RRset, Soa, Zone
from dnsd.config.owner_rules import check_owner
from dnsd.config.yamlio import LineDict, LineList
from dnsd.config.zone_file_section import zone_file
from dnsd.config.zone_options import (
    catalog_group,
    dnssec_section,
    notify_targets,
    transfer_section,
    update_grants,
)
from dnsd.dnsname import is_below_or_at, labels, name_error, parse_name, to_label
from dnsd.rdata import (
    SIGNER_MANAGED,
    TYPE_NS,
    TYPE_TXT,
    from_text,
    from_wire,
    type_number,
    type_problem,
)
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
        file_soa, rrsets = zone_file(ck, doc, origin, ttl)
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
            check_owner(ck, node.line, path, owner, origin, sets, lb)
    free_in_steps(from_file, types_at)  # not at return, in one C call (dnsd.reaper)
    _check_signed(ck, doc, rrsets)
    if not any(s.rtype == TYPE_NS and s.owner == origin for s in rrsets):
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
        if rtype == TYPE_TXT and not text.lstrip().startswith('"'):
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
