"""What a zone transfers (pure): its static records as configured, plus every load-balanced
name's current answer for a client with no location — A/AAAA (or a CNAME) at the load
balancer's TTL, at the current health (dnsd.xfr.lb_answers, kept per name). A secondary
that loses every dnsd node keeps serving that last failover-aware answer (docs/dns.md,
"Zone transfers").
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import dns.message
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from dnslib import QTYPE, RR, DNSHeader, DNSRecord

from dnsd.config.model import RRset as RRsetModel
from dnsd.derived import CARRIED
from dnsd.dnsname import to_label
from dnsd.dnssec.signature import window
from dnsd.health.view import HealthView
from dnsd.rdata import to_wire
from dnsd.reaper import free_in_steps
from dnsd.snapshot import CompiledZone, Snapshot
from dnsd.xfr.lb_answers import LbAnswers, zone_index

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
    answers: LbAnswers  # iterates the load-balanced RRsets in DNS order
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
        return _static_size(self.zone) + len(self.answers)

    def rrsets(self) -> list[dns.rrset.RRset]:
        """Every RRset but the SOA: the configured ones, then the load-balanced answers."""
        return [*self.static, *self.answers]

    def texts(self) -> set[str]:
        """One presentation line per record (IXFR works out differences on these)."""
        return {line for rrset in self.rrsets() for line in rrset.to_text().splitlines()}


def zone_content(snap: Snapshot, view: HealthView, name: str, now: float) -> ZoneContent:
    """The zone `name` as it transfers now (its SOA as the snapshot serves it)."""
    return content_of(snap, name, now, LbAnswers.compute(snap, view, snap.zones[name], now))


def content_of(snap: Snapshot, name: str, now: float, answers: LbAnswers) -> ZoneContent:
    """The zone `name` with these load-balanced answers: O(1) in the number of names (the
    configured records' digest is made once per configuration, the answers' incrementally)."""
    zone = snap.zones[name]
    static_digest = _static_digest(zone)
    soa = _convert([zone.soa])[0]
    f = soa[0]
    digest = hashlib.sha256(
        f"{static_digest}\n{f.mname} {f.rname} {f.refresh} {f.retry} {f.expire} {f.minimum} "
        f"{soa.ttl}\n{answers.digest}\n{signing_marker(snap, name, now)}".encode()
    ).hexdigest()
    return ZoneContent(name, soa, zone, answers, digest)


def signing_marker(snap: Snapshot, name: str, now: float) -> str:
    """For a signed zone, what else changes what it transfers: the signatures' day and the
    keys' states. A new day is a new version, so secondaries fetch fresh signatures long
    before the old ones expire."""
    keys = snap.signing.get(name)
    if keys is None:
        return ""
    states = " ".join(f"{k.tag}:{k.state(now)}" for k in keys.keys)
    return f"signed {window(now)[0]} {states}"


def prepare_transfers(snap: Snapshot) -> None:
    """Digest every zone's configured records and index its load balancers now (in the
    loading thread: 0.2 s for 100,000 records, 0.5 s for 10,000 load balancers), so that a
    version on the event loop costs only its load-balanced answers."""
    for zone in snap.zones.values():
        _static_digest(zone)
        zone_index(zone, snap.lb_graph)
        _static_size(zone)


# Made from the zone's configuration alone: kept with the compiled zone and carried to its
# successors (new serials, a reload of an unchanged file).
STATIC = CARRIED + "xfr static"
DIGEST = CARRIED + "xfr static digest"
SIZE = CARRIED + "xfr static size"


def _configured(zone: CompiledZone) -> Iterator[tuple[str, int, RRsetModel]]:
    """The configured records, one RRset at a time: a list of all of them would be freed
    in one C call that holds the GIL (tens of ms for 100,000 records)."""
    # An unsigned zone's DNSKEY, CDS and CDNSKEY are configured records (written by hand).
    signed = zone.config is not None and zone.config.dnssec_algorithm is not None
    skip = UNSIGNED_ONLY if signed else {QTYPE.SOA}
    for owner, node in zone.nodes.items():
        for rtype, rrset in node.rrsets.items():
            if rtype not in skip:
                yield owner, rtype, rrset


def _static_digest(zone: CompiledZone) -> str:
    """A digest of the configured records (presentation text, sorted): serials rise when
    it changes (dnsd.xfr.versions)."""
    digest: str = _kept(zone, DIGEST, partial(_make_digest, zone))
    return digest


def _make_digest(zone: CompiledZone) -> str:
    lines = [
        f"{owner} {rtype} {rrset.ttl} " + " ".join(sorted(to_wire(rd).hex() for rd in rrset.rdatas))
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
    free_in_steps(runs, lines)  # not at return, in one C call (dnsd.reaper)
    return digest


def _static_size(zone: CompiledZone) -> int:
    size: int = _kept(
        zone, SIZE, lambda: sum(len(rrset.rdatas) for _, _, rrset in _configured(zone))
    )
    return size


def _static(zone: CompiledZone) -> tuple[dns.rrset.RRset, ...]:
    """The configured records of a zone as dnspython RRsets, converted once per loaded
    zone config when first transferred or exported (a new served serial keeps it; a
    reload of an unchanged file too)."""
    converted: tuple[dns.rrset.RRset, ...] = _kept(zone, STATIC, partial(_make_static, zone))
    return converted


def _kept(zone: CompiledZone, key: str, make: Callable[[], Any]) -> Any:
    """Made outside the zone's lock: it takes a loading thread 0.2 s for 100,000 records,
    and the event loop reads the zone's other derived values meanwhile."""
    value = zone.derived.peek(key)
    if value is None:
        value = make()
        zone.derived.put(key, value)
    return value


def _make_static(zone: CompiledZone) -> tuple[dns.rrset.RRset, ...]:
    rrs = [rr for _, _, rrset in _configured(zone) for rr in _records(rrset)]
    return tuple(sorted(_convert(rrs), key=_order))


def _records(rrset: RRsetModel) -> list[RR]:
    label = to_label(rrset.owner)
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
