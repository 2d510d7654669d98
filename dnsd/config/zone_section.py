"""Validate and build the zone part of a file: `zone`, `ttl`, `soa`, `records` (config.md)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dnslib import AAAA, QTYPE, RR, SOA, TXT, A, DNSLabel

from dnsd.config.checker import Checker, join
from dnsd.config.model import RRset, Soa, Zone
from dnsd.config.names import absolute, is_subdomain, name_problem
from dnsd.config.yamlio import LineDict, LineList

MAX_TTL = 2**31 - 1
# Record types a zone may hold (SOA comes from the soa section).
RECORD_TYPES = ("A", "AAAA", "CNAME", "MX", "TXT", "NS", "SRV", "CAA", "PTR")
ZONE_KEYS = ("zone", "ttl", "soa", "records")
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
    origin = absolute(str(zone_raw), ".")
    problem = name_problem(origin)
    if problem:
        ck.error(doc.line_of("zone"), "zone", f"invalid zone name {zone_raw!r}: {problem}")
        return None, []
    ttl = ck.get_int(doc, "ttl", "", default=3600, lo=0, hi=MAX_TTL)
    soa = _parse_soa(ck, doc, origin, ttl)
    records = doc.get("records", LineDict())
    rrsets: list[RRset] = []
    lb_names: dict[str, str] = {}
    lb_uses: list[LbUse] = []
    rmap = ck.mapping(records, doc.line_of("records"), "records")
    if rmap is not None:
        for owner_raw, spec in rmap.items():
            path = join("records", owner_raw)
            line = rmap.line_of(owner_raw)
            owner = absolute(str(owner_raw), origin)
            problem = name_problem(owner)
            if problem:
                ck.error(line, path, f"invalid name: {problem}")
                continue
            if not is_subdomain(owner, origin):
                ck.error(line, path, f"name {owner} is outside zone {origin}")
                continue
            node = ck.mapping(spec, line, path)
            if node is None:
                continue
            sets, lb = _parse_owner(ck, node, path, owner, origin, ttl)
            rrsets.extend(sets)
            if lb is not None:
                lb_names[owner] = lb
                lb_uses.append(LbUse(lb, ck.file, node.line_of("lb"), join(path, "lb")))
            _check_owner(ck, node, path, owner, origin, sets, lb)
    if not any(s.owner == origin and s.rtype == QTYPE.NS for s in rrsets):
        ck.warn(doc.line_of("zone"), "records.@", "the zone apex has no NS records")
    if soa is None:
        return None, lb_uses
    zone = Zone(
        name=origin,
        file=ck.file,
        ttl=ttl,
        soa=soa,
        rrsets=tuple(rrsets),
        lb_names=MappingProxyType(lb_names),
    )
    return zone, lb_uses


def soa_record(zone: Zone) -> RR:
    s = zone.soa
    rdata = SOA(s.mname, s.rname, (s.serial, s.refresh, s.retry, s.expire, s.minimum))
    return RR(zone.name, QTYPE.SOA, ttl=s.ttl, rdata=rdata)


def _parse_soa(ck: Checker, doc: LineDict, origin: str, zone_ttl: int) -> Soa | None:
    if "soa" not in doc:
        ck.error(doc.line, "soa", 'missing required key "soa"')
        return None
    d = ck.mapping(doc["soa"], doc.line_of("soa"), "soa")
    if d is None:
        return None
    ck.keys(d, "soa", SOA_KEYS, required=("mname", "rname"))
    names = {}
    for key in ("mname", "rname"):
        raw = ck.get_str(d, key, "soa", default=None)
        name = absolute(str(raw), origin) if raw else origin
        problem = name_problem(name)
        if raw and problem:
            ck.error(d.line_of(key), f"soa.{key}", f"invalid name: {problem}")
        names[key] = name
    u32 = 2**32 - 1
    values = {
        "serial": ck.get_int(d, "serial", "soa", default=1, lo=0, hi=u32),
        "refresh": ck.get_int(d, "refresh", "soa", default=7200, lo=0, hi=MAX_TTL),
        "retry": ck.get_int(d, "retry", "soa", default=900, lo=0, hi=MAX_TTL),
        "expire": ck.get_int(d, "expire", "soa", default=1209600, lo=0, hi=MAX_TTL),
        "minimum": ck.get_int(d, "minimum", "soa", default=300, lo=0, hi=MAX_TTL),
        "ttl": ck.get_int(d, "ttl", "soa", default=zone_ttl, lo=0, hi=MAX_TTL),
    }
    if any(v is None for v in values.values()):
        return None
    return Soa(mname=names["mname"], rname=names["rname"], **values)


def _parse_owner(
    ck: Checker, node: LineDict, path: str, owner: str, origin: str, zone_ttl: int
) -> tuple[list[RRset], str | None]:
    ttl = ck.get_int(node, "ttl", path, default=zone_ttl, lo=0, hi=MAX_TTL)
    lb = None
    sets: list[RRset] = []
    for key, value in node.items():
        line = node.line_of(key)
        if key == "ttl":
            continue
        if key == "lb":
            lb = ck.get_str(node, "lb", path)
            continue
        rtype = str(key).upper()
        if rtype not in RECORD_TYPES:
            ck.keys(_single(node, key), path, (*RECORD_TYPES, "lb", "ttl"))
            continue
        items = _items(ck, value, line, join(path, key))
        records = []
        for text, item_line, item_path in items:
            rr = _record(ck, rtype, text, owner, origin, ttl, item_line, item_path)
            if rr is not None:
                records.append(rr)
        if records:
            sets.append(RRset(owner, getattr(QTYPE, rtype), ttl, tuple(records)))
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


def _record(
    ck: Checker, rtype: str, text: str, owner: str, origin: str, ttl: int, line: int, path: str
) -> RR | None:
    label = DNSLabel(owner)
    try:
        if rtype == "A":
            return RR(label, QTYPE.A, ttl=ttl, rdata=A(str(ipaddress.IPv4Address(text.strip()))))
        if rtype == "AAAA":
            addr = ipaddress.IPv6Address(text.strip())
            return RR(label, QTYPE.AAAA, ttl=ttl, rdata=AAAA(str(addr)))
        if rtype == "TXT" and not text.lstrip().startswith('"'):
            # A plain YAML string is one TXT value; split into 255-byte character-strings.
            data = text.encode()
            chunks = [data[i : i + 255] for i in range(0, len(data), 255)] or [b""]
            return RR(label, QTYPE.TXT, ttl=ttl, rdata=TXT(chunks))
        parsed = RR.fromZone(f"{owner} {ttl} IN {rtype} {text}", origin=origin)
        if len(parsed) != 1:
            raise ValueError("expected exactly one record")
        rr: RR = parsed[0]
        for target in _targets(rr):
            problem = name_problem(target)
            if problem:
                raise ValueError(f"target {target}: {problem}")
        return RR(label, rr.rtype, ttl=ttl, rdata=rr.rdata)
    except Exception as exc:
        ck.error(line, path, f"invalid {rtype} value {text!r}: {exc}")
        return None


def _targets(rr: RR) -> list[str]:
    """Names inside the RDATA (lower-case, absolute), for validation and additional data."""
    rd = rr.rdata
    for attr in ("label", "mx", "target"):
        value = getattr(rd, attr, None)
        if isinstance(value, DNSLabel):
            return [str(value).lower()]
    return []


def _check_owner(
    ck: Checker,
    node: LineDict,
    path: str,
    owner: str,
    origin: str,
    sets: list[RRset],
    lb: str | None,
) -> None:
    types = {QTYPE.get(s.rtype) for s in sets}
    line = node.line
    if "CNAME" in types:
        cname = next(s for s in sets if s.rtype == QTYPE.CNAME)
        if len(cname.records) > 1:
            ck.error(line, join(path, "CNAME"), "a name can have only one CNAME")
        if len(types) > 1 or lb:
            ck.error(line, path, "CNAME cannot stand beside other records at the same name")
        if owner == origin:
            ck.error(line, path, "CNAME is not allowed at the zone apex")
    if lb and types & {"A", "AAAA"}:
        ck.error(line, path, "a load-balanced name (lb) cannot also have A or AAAA records")
    if owner.startswith("*.") and "NS" in types:
        ck.error(line, path, "a wildcard name cannot hold NS records")
    if owner != origin and "NS" in types and (types - {"NS"} or lb):
        ck.warn(line, path, "only NS records are served at a delegation point")
