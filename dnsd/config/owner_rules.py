"""What may stand together at one owner name (docs/configuration.md): CNAME alone, one
DNAME, NS and DS only at a delegation, no addresses beside a load balancer. Both ways a
zone's records are written — a `records:` section and a zone file — check each owner so."""

from __future__ import annotations

from dnsd.config.checker import Checker, join
from dnsd.config.model import RRset
from dnsd.rdata import TYPE_CNAME, TYPE_DNAME, TYPE_DS, TYPE_NS, target
from dnsd.rdata import type_text as rtype_name

CHECKED_RTYPES = frozenset({TYPE_CNAME, TYPE_NS, TYPE_DS, TYPE_DNAME})  # check_owner's rules
_LB_EXCLUDES = frozenset({1, 28})  # A AAAA


def check_owner(
    ck: Checker,
    line: int,
    path: str,
    owner: str,
    origin: str,
    sets: list[RRset],
    lb: str | None,
) -> None:
    rtypes = {s.rtype for s in sets}
    if not rtypes & CHECKED_RTYPES and not (lb and rtypes & _LB_EXCLUDES):
        return  # nothing below applies (most names: addresses, TXT, MX)
    types = {rtype_name(t) for t in rtypes}
    if "CNAME" in types:
        cname = next(s for s in sets if s.rtype == TYPE_CNAME)
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
