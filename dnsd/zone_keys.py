"""A zone's DNSSEC keys as data: each key's timetable and material, and which of them sign
and are published at a moment. The snapshot carries them; dnsd.dnssec loads, rolls and
signs with them (keys.py, signer.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.DNSKEY
import dns.rrset

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@dataclass(frozen=True, slots=True)
class ZoneKey:
    zone: str
    algorithm: int
    tag: int
    role: str  # "csk" | "ksk" | "zsk"
    publish: float  # in the DNSKEY set from
    activate: float  # signing from
    retire: float | None  # no longer signing from (None: never)
    remove: float | None  # out of the DNSKEY set from (None: never)
    dnskey: dns.rdtypes.ANY.DNSKEY.DNSKEY
    private: PrivateKey = field(repr=False)

    def state(self, now: float) -> str:
        if now < self.publish:
            return "created"
        if now < self.activate:
            return "published"
        if self.retire is None or now < self.retire:
            return "active"
        if self.remove is None or now < self.remove:
            return "retired"
        return "removed"

    def ds(self, digest: str = "SHA256") -> Any:
        from dns.dnssec import make_ds  # with its crypto (~8 MiB): only for a signed zone

        return make_ds(self.zone, self.dnskey, digest)

    def changes(self) -> list[float]:
        return [t for t in (self.publish, self.activate, self.retire, self.remove) if t is not None]


@dataclass(frozen=True, slots=True)
class ZoneKeys:
    """A zone's keys as they stand at `at`: which sign what, which are published."""

    zone: str
    keys: tuple[ZoneKey, ...]
    at: float = 0.0

    def signer_for(self, rdtype: int) -> ZoneKey:
        """The active key that signs an RRset of this type: the KSK (or CSK) the DNSKEY
        set, the ZSK (or CSK) the rest."""
        wanted = ("ksk", "csk") if rdtype == dns.rdatatype.DNSKEY else ("zsk", "csk")
        return next(k for k in self.keys if k.role in wanted and k.state(self.at) == "active")

    def published(self) -> list[ZoneKey]:
        return [k for k in self.keys if k.state(self.at) in ("published", "active", "retired")]

    def sep_keys(self) -> list[ZoneKey]:
        """The keys the parent's DS should point at (CDS/CDNSKEY)."""
        return [k for k in self.published() if k.role in ("ksk", "csk")]

    def dnskey_rrset(self, ttl: int) -> dns.rrset.RRset:
        rrset = dns.rrset.RRset(
            dns.name.from_text(self.zone), dns.rdataclass.IN, dns.rdatatype.DNSKEY
        )
        for key in self.published():
            rrset.add(key.dnskey, ttl)
        return rrset

    def cds_rrsets(self, ttl: int) -> list[dns.rrset.RRset]:
        """CDS and CDNSKEY (RFC 7344) for the parent: the DS and the DNSKEY of each key the
        DS should point at — what the apex serves live, and what a transfer carries."""
        origin = dns.name.from_text(self.zone)
        out = []
        for rdtype, rdatas in (
            (dns.rdatatype.CDS, [k.ds().to_digestable() for k in self.sep_keys()]),
            (dns.rdatatype.CDNSKEY, [k.dnskey.to_digestable() for k in self.sep_keys()]),
        ):
            rrset = dns.rrset.RRset(origin, dns.rdataclass.IN, rdtype)
            for data in rdatas:
                rrset.add(dns.rdata.from_wire(dns.rdataclass.IN, rdtype, data, 0, len(data)), ttl)
            if rrset:
                out.append(rrset)
        return out

    def next_change(self) -> float | None:
        later = [t for k in self.keys for t in k.changes() if t > self.at]
        return min(later) if later else None
