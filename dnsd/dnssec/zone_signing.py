"""A whole zone signed the classic way, for what leaves dnsd as a zone: AXFR/IXFR and
`dnsd export`. dnspython's `sign_zone` adds an NSEC chain and signs every RRset with the
zone's active keys (KSK/CSK the DNSKEY set); the DNSKEY set holds every published key, and
CDS/CDNSKEY point at the keys the DS should (the apex serves the same sets live), so
a secondary serves what dnsd serves — the same keys, the same DS — and validators accept
either. Made once per zone version and day (the signatures' window), never per query."""

from __future__ import annotations

from collections import OrderedDict

import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.zone

from dnsd.dnssec.signature import window
from dnsd.zone_keys import ZoneKeys

_signed: OrderedDict[tuple[str, str, int], tuple[dns.rrset.RRset, list[dns.rrset.RRset]]] = (
    OrderedDict()
)
KEY_TYPES = (dns.rdatatype.DNSKEY, dns.rdatatype.CDS, dns.rdatatype.CDNSKEY, dns.rdatatype.RRSIG)
KEPT = 8  # signed zones kept (each as large as its zone, with its NSEC chain and RRSIGs)


def signed_zone(
    name: str,
    soa: dns.rrset.RRset,
    rrsets: list[dns.rrset.RRset],
    digest: str,
    keys: ZoneKeys,
    dnskey_ttl: int,
    now: float,
) -> tuple[dns.rrset.RRset, list[dns.rrset.RRset]]:
    """(the SOA, every other RRset with NSEC and RRSIGs) of the zone, signed."""
    inception, expiration = window(now)
    key = (name, digest, inception)
    found = _signed.get(key)
    if found is not None:
        return found
    origin = dns.name.from_text(name)
    zone = dns.zone.Zone(origin, relativize=False)
    with zone.writer() as txn:
        txn.add(soa)
        txn.add(keys.dnskey_rrset(dnskey_ttl))
        for rrset in keys.cds_rrsets(dnskey_ttl):  # as the apex serves them (with_keys)
            txn.add(rrset)
        for rrset in rrsets:
            if rrset.rdtype not in KEY_TYPES:
                txn.add(rrset)
    from dns.dnssec import sign_zone  # with the crypto: only where a signed zone leaves dnsd

    signers = {keys.signer_for(dns.rdatatype.DNSKEY), keys.signer_for(dns.rdatatype.A)}
    sign_zone(
        zone,
        keys=[(k.private, k.dnskey) for k in signers],
        add_dnskey=False,
        inception=inception,
        expiration=expiration,
    )
    out: list[dns.rrset.RRset] = []
    signed_soa = None
    for owner, rdataset in zone.iterate_rdatasets():
        rrset = dns.rrset.RRset(owner, rdataset.rdclass, rdataset.rdtype, rdataset.covers)
        rrset.update(rdataset)
        if rrset.rdtype == dns.rdatatype.SOA:
            signed_soa = rrset
        else:
            out.append(rrset)
    assert signed_soa is not None
    _signed[key] = (signed_soa, out)
    if len(_signed) > KEPT:
        _signed.popitem(last=False)
    return signed_soa, out
