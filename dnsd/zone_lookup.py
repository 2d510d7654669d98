"""Pure authoritative lookup: (snapshot, qname, qtype) → what the answer must hold.

Implements RFC 1034 §4.3.2 with the RFC 4592 wildcard rules: longest-match zone,
delegation cuts (referral with glue, AA clear), exact match, CNAME chains followed inside
the zone (RFC 6604: the final name decides the rcode), wildcard synthesis from the closest
encloser, NXDOMAIN vs NODATA (empty non-terminals exist, RFC 8020), ANY per RFC 8482 (one
RRset, never the whole name). A load-balanced name is returned as a pending `lb` step; the
caller runs steering for it. No I/O, no clocks, no randomness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from dnslib import QTYPE, RCODE

from dnsd.config.model import LoadBalancer, RRset
from dnsd.snapshot import CompiledZone, Node, Snapshot

MAX_CNAME_HOPS: Final = 8
ANY: Final = QTYPE.ANY
ADDRESS_TYPES: Final = (QTYPE.A, QTYPE.AAAA)
# RFC 8482 §4.1: answer ANY with one RRset; prefer the ones a client most likely wants.
ANY_PREFERENCE: Final = (
    QTYPE.A, QTYPE.AAAA, QTYPE.CNAME, QTYPE.MX, QTYPE.TXT, QTYPE.NS, QTYPE.SRV, QTYPE.CAA,
    QTYPE.PTR, QTYPE.SOA,
)  # fmt: skip
NEEDS_ADDRESS: Final = {QTYPE.NS: "label", QTYPE.MX: "label", QTYPE.SRV: "target"}


@dataclass(slots=True)
class AnswerPart:
    """One RRset for the answer section. `owner` None means: the query name as asked."""

    owner: str | None
    rrset: RRset


@dataclass(slots=True)
class Lookup:
    """What to put in the reply. `lb` is a load-balanced name still to be steered."""

    rcode: int = RCODE.NOERROR
    authoritative: bool = True
    zone: CompiledZone | None = None
    answer: list[AnswerPart] = field(default_factory=list)
    authority: list[RRset] = field(default_factory=list)
    additional: list[RRset] = field(default_factory=list)
    negative: bool = False  # NODATA/NXDOMAIN: the zone SOA goes in the authority section
    lb: LoadBalancer | None = None
    lb_owner: str | None = None  # presented owner for the steered records (None = qname)


def find_zone(snap: Snapshot, qname: str) -> CompiledZone | None:
    """The zone with the longest name that qname is in (or equal to)."""
    labels = qname.rstrip(".").split(".") if qname != "." else []
    start = max(0, len(labels) - snap.max_zone_labels)
    for i in range(start, len(labels)):
        zone = snap.zones.get(".".join(labels[i:]) + ".")
        if zone is not None:
            return zone
    return snap.zones.get(".")


def lookup(snap: Snapshot, qname: str, qtype: int) -> Lookup:
    """qname must be lower-case and absolute (trailing dot)."""
    zone = find_zone(snap, qname)
    if zone is None:
        return Lookup(rcode=RCODE.REFUSED, authoritative=False)
    result = Lookup(zone=zone)
    name, owner = qname, None
    seen = {qname}
    for _ in range(MAX_CNAME_HOPS + 1):
        target = _step(zone, name, owner, qtype, result)
        if target is None:
            return result
        if target in seen or _zone_of(zone, target) is not zone:
            return result  # loop, or chain leaves the zone: the resolver follows it
        seen.add(target)
        name = owner = target
    return result


def _zone_of(zone: CompiledZone, name: str) -> CompiledZone | None:
    return zone if name == zone.name or name.endswith("." + zone.name) else None


def _step(zone: CompiledZone, name: str, owner: str | None, qtype: int, out: Lookup) -> str | None:
    """Resolve `name` in `zone` into `out`; return a CNAME target to follow, or None."""
    cut = _delegation(zone, name)
    if cut is not None and not (cut == name and qtype == QTYPE.DS):
        _referral(zone, cut, out)
        return None
    node = zone.nodes.get(name)
    if node is None:
        node = wildcard_node(zone, name)
        if node is None:
            out.rcode = RCODE.NXDOMAIN
            out.negative = True
            return None
    cname = node.rrsets.get(QTYPE.CNAME)
    if cname is not None and qtype not in (QTYPE.CNAME, ANY):
        out.answer.append(AnswerPart(owner, cname))
        return str(cname.rdatas[0].label).lower()
    if node.lb is not None and qtype in (QTYPE.A, QTYPE.AAAA, ANY):
        out.lb, out.lb_owner = node.lb, owner
        return None
    rrset = _pick_any(node) if qtype == ANY else node.rrsets.get(qtype)
    if rrset is None:
        out.negative = True
        return None
    out.answer.append(AnswerPart(owner, rrset))
    _add_addresses(zone, rrset, out)
    return None


def _delegation(zone: CompiledZone, name: str) -> str | None:
    """The highest delegation cut at or above `name` (below the apex), if any."""
    if not zone.cuts:
        return None
    labels = name.rstrip(".").split(".")
    below_apex = len(labels) - zone.label_count
    for depth in range(1, below_apex + 1):
        candidate = ".".join(labels[len(labels) - zone.label_count - depth :]) + "."
        if candidate in zone.cuts:
            return candidate
    return None


def _referral(zone: CompiledZone, cut: str, out: Lookup) -> None:
    ns = zone.nodes[cut].rrsets[QTYPE.NS]
    out.authority.append(ns)
    out.authoritative = bool(out.answer)
    for rdata in ns.rdatas:
        _add_glue(zone, str(rdata.label).lower(), out)


def wildcard_node(zone: CompiledZone, name: str) -> Node | None:
    """RFC 4592: the source of synthesis is `*.` + the closest encloser, if it exists."""
    encloser = name
    while encloser != zone.name:
        encloser = encloser.split(".", 1)[1] or "."
        if encloser in zone.nodes:
            return zone.nodes.get("*." + encloser if encloser != "." else "*.")
    return None


def _pick_any(node: Node) -> RRset | None:
    for rtype in ANY_PREFERENCE:
        rrset = node.rrsets.get(rtype)
        if rrset is not None:
            return rrset
    return None


def _add_addresses(zone: CompiledZone, rrset: RRset, out: Lookup) -> None:
    attr = NEEDS_ADDRESS.get(rrset.rtype)
    if attr is None:
        return
    for rdata in rrset.rdatas:
        _add_glue(zone, str(getattr(rdata, attr)).lower(), out)


def _add_glue(zone: CompiledZone, target: str, out: Lookup) -> None:
    node = zone.nodes.get(target)
    if node is None:
        return
    for rtype in ADDRESS_TYPES:
        rrset = node.rrsets.get(rtype)
        if rrset is not None and rrset not in out.additional:
            out.additional.append(rrset)
