"""Pure authoritative lookup: (snapshot, qname, qtype) → what the answer must hold.

Implements RFC 1034 §4.3.2 with the RFC 4592 wildcard rules: longest-match zone,
delegation cuts (referral with glue, AA clear), exact match, CNAME chains followed inside
the zone (RFC 6604: the final name decides the rcode), wildcard synthesis from the closest
encloser, NXDOMAIN vs NODATA (empty non-terminals exist, RFC 8020), ANY per RFC 8482 (one
RRset, never the whole name). A load-balanced name is returned as a pending `lb` step; the
caller runs steering for it. A DNAME above the name answers with itself and a CNAME made
from it (RFC 6672 §3.2), followed like any CNAME. No I/O, no clocks, no randomness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from dnslib import CNAME, QTYPE, RCODE

from dnsd.config.model import LoadBalancer, RRset
from dnsd.dnsname import is_below_or_at, labels, parent, to_label, wire_length
from dnsd.rdata import (
    SVC_TYPES,
    TYPE_A,
    TYPE_AAAA,
    TYPE_ANY,
    TYPE_CNAME,
    TYPE_DNAME,
    TYPE_DS,
    target,
)
from dnsd.snapshot import CompiledZone, Node, Snapshot

MAX_CNAME_HOPS: Final = 8
ANY: Final = QTYPE.ANY
_ADDRESS_OR_ANY: Final = (TYPE_A, TYPE_AAAA, TYPE_ANY)
ADDRESS_TYPES: Final = (QTYPE.A, QTYPE.AAAA)
# RFC 8482 §4.1: answer ANY with one RRset; prefer the ones a client most likely wants.
ANY_PREFERENCE: Final = (
    QTYPE.A,
    QTYPE.AAAA,
    QTYPE.CNAME,
    QTYPE.MX,
    QTYPE.TXT,
    QTYPE.NS,
    QTYPE.SRV,
    QTYPE.CAA,
    QTYPE.PTR,
    QTYPE.SOA,
)
# RFC 1034 §3.6.2 glue and additional data; SVCB/HTTPS targets too (RFC 9460 §4).
NEEDS_ADDRESS: Final = frozenset({QTYPE.NS, QTYPE.MX, QTYPE.SRV, 64, 65})


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
    parts = labels(qname)
    start = max(0, len(parts) - snap.max_zone_labels)
    for i in range(start, len(parts)):
        zone = snap.zones.get(".".join(parts[i:]) + ".")
        if zone is not None:
            return zone
    return snap.zones.get(".")


def lookup(snap: Snapshot, qname: str, qtype: int) -> Lookup:
    """qname must be lower-case and absolute (trailing dot)."""
    zone = find_zone(snap, qname)
    if zone is None:
        return Lookup(rcode=RCODE.REFUSED, authoritative=False)
    return lookup_in(zone, qname, qtype)


def lookup_in(zone: CompiledZone, qname: str, qtype: int) -> Lookup:
    """`lookup` in a zone already found (qname is in it or equal to its name)."""
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
    return zone if is_below_or_at(name, zone.name) else None


def _step(zone: CompiledZone, name: str, owner: str | None, qtype: int, out: Lookup) -> str | None:
    """Resolve `name` in `zone` into `out`; return a CNAME target to follow, or None."""
    cut = _delegation(zone, name)
    if cut is not None and cut in zone.dnames:
        synthesized = _synthesize(zone, cut, name, owner, out)
        return None if qtype == TYPE_CNAME else synthesized  # the CNAME asked for
    if cut is not None and not (cut == name and qtype == TYPE_DS):
        _referral(zone, cut, out)
        return None
    node = zone.nodes.get(name)
    if node is None:
        node = wildcard_node(zone, name)
        if node is None:
            out.rcode = RCODE.NXDOMAIN
            out.negative = True
            return None
    cname = node.rrsets.get(TYPE_CNAME)
    if cname is not None and qtype not in (TYPE_CNAME, ANY):
        out.answer.append(AnswerPart(owner, cname))
        return target(TYPE_CNAME, cname.rdatas[0])
    if node.lb is not None and qtype in _ADDRESS_OR_ANY:
        out.lb, out.lb_owner = node.lb, owner
        return None
    if node.lb is not None and qtype in SVC_TYPES and qtype in node.rrsets:
        # docs/steering.md, HTTPS and SVCB at a load-balanced name: the records as
        # configured, their address hints set from this client's steered answers
        out.lb, out.lb_owner = node.lb, owner
        out.answer.append(AnswerPart(owner, node.rrsets[qtype]))
        return None
    rrset = _pick_any(node) if qtype == ANY else node.rrsets.get(qtype)
    if rrset is None:
        out.negative = True
        return None
    out.answer.append(AnswerPart(owner, rrset))
    _add_addresses(zone, rrset, out)
    return None


def _delegation(zone: CompiledZone, name: str) -> str | None:
    """The highest delegation cut at or above `name` (below the apex), or the highest
    DNAME owner above it (the apex too), whichever comes first: each hides the rest."""
    if not zone.cuts and not zone.dnames:
        return None
    parts = labels(name)
    below_apex = len(parts) - zone.label_count
    if below_apex > 0 and zone.name in zone.dnames:
        return zone.name
    for depth in range(1, below_apex + 1):
        candidate = ".".join(parts[len(parts) - zone.label_count - depth :]) + "."
        if candidate in zone.cuts or (depth < below_apex and candidate in zone.dnames):
            return candidate
    return None


def _synthesize(
    zone: CompiledZone, at: str, name: str, owner: str | None, out: Lookup
) -> str | None:
    """RFC 6672 §3.2: the DNAME at `at`, then `name` as a CNAME to the same labels under
    the DNAME's target (TTL the DNAME's); a result longer than 255 octets is YXDOMAIN."""
    dname = zone.nodes[at].rrsets[TYPE_DNAME]
    out.answer.append(AnswerPart(at, dname))
    parts = labels(name)
    prefix = parts[: len(parts) - len(labels(at))]
    new_target = ".".join([*prefix, *labels(zone.dnames[at])]) + "."
    if wire_length(new_target) > 255:
        out.rcode = RCODE.YXDOMAIN
        return None
    synthesized = RRset(name, QTYPE.CNAME, dname.ttl, (CNAME(to_label(new_target)),))
    out.answer.append(AnswerPart(owner, synthesized))
    return new_target


def _referral(zone: CompiledZone, cut: str, out: Lookup) -> None:
    ns = zone.nodes[cut].rrsets[QTYPE.NS]
    out.authority.append(ns)
    out.authoritative = bool(out.answer)
    for rdata in ns.rdatas:
        _add_glue(zone, target(QTYPE.NS, rdata) or "", out)


def wildcard_node(zone: CompiledZone, name: str) -> Node | None:
    """RFC 4592: the source of synthesis is `*.` + the closest encloser, if it exists."""
    encloser = name
    while encloser != zone.name:
        encloser = parent(encloser)
        if encloser in zone.nodes:
            return zone.nodes.get("*." + encloser if encloser != "." else "*.")
    return None


def _pick_any(node: Node) -> RRset | None:
    for rtype in ANY_PREFERENCE:
        rrset = node.rrsets.get(rtype)
        if rrset is not None:
            return rrset
    return next(iter(node.rrsets.values()), None)  # a name with other types only


def _add_addresses(zone: CompiledZone, rrset: RRset, out: Lookup) -> None:
    if rrset.rtype not in NEEDS_ADDRESS:
        return
    for rdata in rrset.rdatas:
        _add_glue(zone, target(rrset.rtype, rdata) or "", out)


def _add_glue(zone: CompiledZone, target: str, out: Lookup) -> None:
    node = zone.nodes.get(target)
    if node is None:
        return
    for rtype in ADDRESS_TYPES:
        rrset = node.rrsets.get(rtype)
        if rrset is not None and rrset not in out.additional:
            out.additional.append(rrset)
