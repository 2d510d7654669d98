"""What a zone transfers (pure): its static records as configured, plus every load-balanced
name's current answer for a client with no location — A/AAAA (or a CNAME) at the load
balancer's TTL, at the current health. A secondary that loses every dnsd node keeps
serving that last failover-aware answer (docs/dns.md, "Zone transfers").

The answer is the full answer path's (`steer`), with a fixed random source so the same
health gives the same content: a trickle or a `random` policy contributes one stable draw.
"""

from __future__ import annotations

import hashlib
import heapq
import ipaddress
import random
from dataclasses import dataclass
from typing import Any

import dns.message
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from dnslib import AAAA, CNAME, QTYPE, RR, A, DNSHeader, DNSLabel, DNSRecord

from dnsd.config.model import RRset as RRsetModel
from dnsd.config.model import Zone
from dnsd.dnssec.signer import window
from dnsd.geo.locate import NOWHERE
from dnsd.health.view import HealthView
from dnsd.snapshot import CompiledZone, Snapshot
from dnsd.steering import ClientInfo, SteeringInputs, steer

NO_LOCATION = ClientInfo(address=ipaddress.IPv4Address(0), location=NOWHERE)
DRAW_SEED = 0  # the fixed random source of transferred answers
# Not configured records: the SOA (a version's own), and the DNSSEC keys and signatures a
# signed zone gets when it is signed for transfer (dnsd.dnssec.zone_signing).
UNSIGNED_ONLY = frozenset({QTYPE.SOA, 46, 47, 48, 59, 60})  # SOA RRSIG NSEC DNSKEY CDS CDNSKEY
_CHUNK = 200  # records per conversion message (dnslib → dnspython), well under 64 KiB


@dataclass(frozen=True, slots=True)
class ZoneContent:
    """One version of a zone as transferred: the SOA, the configured records and the
    load-balanced answers. `digest` covers everything but the SOA serial. The configured
    records are converted for transfers only when a transfer or an export needs them
    (then once per zone configuration): a zone nobody transfers costs no copy of its
    records, and a start or reload no conversion (5 s and 80 MiB for 100,000 records)."""

    name: str
    soa: dns.rrset.RRset
    zone: CompiledZone
    answers: tuple[dns.rrset.RRset, ...]
    digest: str

    @property
    def static(self) -> tuple[dns.rrset.RRset, ...]:
        return _static(self.zone)

    @property
    def serial(self) -> int:
        return int(self.soa[0].serial)

    @property
    def size(self) -> int:
        """Records, counted without converting them (the event loop asks, per version)."""
        return _static_size(self.zone) + sum(len(rrset) for rrset in self.answers)

    def rrsets(self) -> list[dns.rrset.RRset]:
        """Every RRset but the SOA: the configured ones, then the load-balanced answers."""
        return [*self.static, *self.answers]

    def texts(self) -> set[str]:
        """One presentation line per record (IXFR works out differences on these)."""
        return {line for rrset in self.rrsets() for line in rrset.to_text().splitlines()}


def zone_content(snap: Snapshot, view: HealthView, name: str, now: float) -> ZoneContent:
    """The zone `name` as it transfers now (its SOA as the snapshot serves it)."""
    zone = snap.zones[name]
    static_digest = _static_digest(zone)
    answers = sorted(lb_answers(snap, view, zone, now), key=_order)
    soa = _convert([zone.soa])[0]
    f = soa[0]
    digest = hashlib.sha256(
        f"{static_digest}\n{f.mname} {f.rname} {f.refresh} {f.retry} {f.expire} {f.minimum} "
        f"{soa.ttl}\n{_text(answers)}\n{signing_marker(snap, name, now)}".encode()
    ).hexdigest()
    return ZoneContent(name, soa, zone, tuple(answers), digest)


def signing_marker(snap: Snapshot, name: str, now: float) -> str:
    """For a signed zone, what else changes what it transfers: the signatures' day and the
    keys' states. A new day is a new version, so secondaries fetch fresh signatures long
    before the old ones expire."""
    keys = snap.signing.get(name)
    if keys is None:
        return ""
    states = " ".join(f"{k.tag}:{k.state(now)}" for k in keys.keys)
    return f"signed {window(now)[0]} {states}"


def lb_answers(
    snap: Snapshot, view: HealthView, zone: CompiledZone, now: float
) -> list[dns.rrset.RRset]:
    """Each load-balanced owner's answer for a client with no location."""
    out: list[RR] = []
    for owner, node in _lb_nodes(zone):
        found: list[RR] = []
        for qtype in (QTYPE.A, QTYPE.AAAA):
            inputs = SteeringInputs(snap, view, NO_LOCATION, random.Random(DRAW_SEED), now)
            decision = steer(inputs, node.lb, qtype)
            final = decision.innermost()
            if final.cname:
                found = [RR(owner, QTYPE.CNAME, ttl=decision.ttl, rdata=CNAME(final.cname))]
                break
            rdata_type = AAAA if qtype == QTYPE.AAAA else A
            found += [
                RR(owner, qtype, ttl=decision.ttl, rdata=rdata_type(a)) for a in final.addresses
            ]
        out.extend(found)
    return _convert(out)


def prepare_transfers(snap: Snapshot) -> None:
    """Digest every zone's configured records now (in the loading thread, 0.2 s for
    100,000 records): a version then costs only its load-balanced answers."""
    for zone in snap.zones.values():
        _static_digest(zone)
        _static_size(zone)
        _lb_nodes(zone)


_STATIC: dict[int, tuple[Zone, tuple[dns.rrset.RRset, ...]]] = {}
_DIGESTS: dict[int, tuple[Zone, str]] = {}
_SIZES: dict[int, tuple[Zone, int]] = {}
_LB_NODES: dict[int, tuple[CompiledZone, list[tuple[str, Any]]]] = {}
_KEEP = 64  # zone configurations remembered (a reload of an unchanged file keeps its own)


def _configured(zone: CompiledZone) -> list[tuple[str, int, RRsetModel]]:
    return [
        (owner, rtype, rrset)
        for owner, node in zone.nodes.items()
        for rtype, rrset in node.rrsets.items()
        if rtype not in UNSIGNED_ONLY
    ]


def _static_digest(zone: CompiledZone) -> str:
    """A digest of the configured records (presentation text, sorted): serials rise when
    it changes (dnsd.xfr.versions)."""
    hit = _DIGESTS.get(id(zone.config))
    if hit is not None and hit[0] is zone.config:
        return hit[1]
    lines = [
        f"{owner} {rtype} {rrset.ttl} " + " ".join(sorted(str(rdata) for rdata in rrset.rdatas))
        for owner, rtype, rrset in _configured(zone)
    ]
    # The same digest as of "\n".join(sorted(lines)), made in small steps: this runs in the
    # loading thread, and one sort or join of 100,000 lines holds the GIL (every thread of
    # the server) for 100 ms.
    step = 4096
    runs = [sorted(lines[i : i + step]) for i in range(0, len(lines), step)]
    sha = hashlib.sha256()
    for i, line in enumerate(heapq.merge(*runs)):
        sha.update(b"\n" + line.encode() if i else line.encode())
    digest = sha.hexdigest()
    _remember(_DIGESTS, zone.config, digest)
    return digest


def _lb_nodes(zone: CompiledZone) -> list[tuple[str, Any]]:
    """The load-balanced names of a compiled zone, found once (in the loading thread): a
    pass over 100,000 names per version would run on the event loop. By the compiled
    zone, not its config: a reload relinks the names whose load balancer changed."""
    hit = _LB_NODES.get(id(zone))
    if hit is not None and hit[0] is zone:
        return hit[1]
    found = [(owner, node) for owner, node in zone.nodes.items() if node.lb is not None]
    if len(_LB_NODES) >= 8:  # each holds a compiled zone: few (the journal holds more)
        _LB_NODES.pop(next(iter(_LB_NODES)))
    _LB_NODES[id(zone)] = (zone, found)
    return found


def _static_size(zone: CompiledZone) -> int:
    hit = _SIZES.get(id(zone.config))
    if hit is not None and hit[0] is zone.config:
        return hit[1]
    size = sum(len(rrset.rdatas) for _, _, rrset in _configured(zone))
    _remember(_SIZES, zone.config, size)
    return size


def _static(zone: CompiledZone) -> tuple[dns.rrset.RRset, ...]:
    """The configured records of a zone as dnspython RRsets, converted once per loaded
    zone config when first transferred or exported (a new served serial keeps it; a
    reload of an unchanged file too)."""
    hit = _STATIC.get(id(zone.config))
    if hit is not None and hit[0] is zone.config:
        return hit[1]
    rrs = [rr for _, _, rrset in _configured(zone) for rr in _records(rrset)]
    converted = tuple(sorted(_convert(rrs), key=_order))
    _remember(_STATIC, zone.config, converted)
    return converted


def _remember(table: dict[int, Any], config: Zone, value: Any) -> None:
    if len(table) >= _KEEP:
        table.pop(next(iter(table)))
    table[id(config)] = (config, value)


def _records(rrset: RRsetModel) -> list[RR]:
    label = DNSLabel(rrset.owner)
    return [RR(label, rrset.rtype, ttl=rrset.ttl, rdata=rdata) for rdata in rrset.rdatas]


def _convert(rrs: list[RR]) -> list[dns.rrset.RRset]:
    """dnslib records → dnspython RRsets, through the wire format (exact for every type)."""
    merged: dict[tuple[dns.name.Name, int], dns.rrset.RRset] = {}
    for start in range(0, len(rrs), _CHUNK):
        record = DNSRecord(DNSHeader(qr=1))
        for rr in rrs[start : start + _CHUNK]:
            record.add_answer(rr)
        message = dns.message.from_wire(bytes(record.pack()))
        for rrset in message.answer:
            key = (rrset.name, rrset.rdtype)
            if key in merged:
                merged[key].update(rrset)
            else:
                merged[key] = rrset
    return list(merged.values())


def _order(rrset: dns.rrset.RRset) -> tuple[dns.name.Name, int]:
    return (rrset.name, rrset.rdtype)


def _text(rrsets: list[dns.rrset.RRset] | tuple[dns.rrset.RRset, ...]) -> str:
    return "\n".join(line for r in rrsets for line in sorted(r.to_text().splitlines()))
