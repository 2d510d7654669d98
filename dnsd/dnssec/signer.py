"""Online signing (RFC 4033–4035): a reply to a DO=1 query for a signed zone gets an RRSIG
for every RRset it carries, made as it leaves and cached per (RRset, key, window).

* Positive answers, CNAMEs, the SOA of negative answers, DNSKEY/CDS/CDNSKEY, and address
  records in the additional section are signed; a referral's NS set and its glue are not
  (they are the child's), but a referral carries the signed DS set or a signed NSEC that
  proves there is none.
* Denial is compact (RFC 9824): NXDOMAIN is answered NOERROR with one NSEC at the name
  whose next name is `\\000.name` and whose bitmap holds RRSIG, NSEC and NXNAME; NODATA with
  one NSEC at the name listing its types. Each NSEC covers only that name: nothing to walk.
* A wildcard answer is signed as the query name itself (an online signer may: the answer
  then needs no proof of non-existence, and validators see an ordinary answer).
* Signatures hold from an hour before the start of the current day to seven days after
  it; a new day makes new ones, so no signature served is ever less than six days from
  expiry. At most `CACHE_SIZE` signatures are kept (least recently used go first).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Final

import dns.dnssec
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.NSEC
import dns.rrset

from dnsd.dnssec.keys import ZoneKeys
from dnsd.rdata import to_dnspython
from dnsd.snapshot import CompiledZone
from dnsd.zone_lookup import wildcard_node

DAY: Final = 86400
VALIDITY_DAYS: Final = 7
CACHE_SIZE: Final = 200_000
ADDRESS = (dns.rdatatype.A, dns.rdatatype.AAAA)
LB_TYPES = (dns.rdatatype.A, dns.rdatatype.AAAA)

_cache: OrderedDict[tuple[object, ...], dns.rrset.RRset] = OrderedDict()
# A test-only switch: every signature made is broken, so a test proves validators check.
CORRUPT_FOR_TESTS = os.environ.get("DNSD_TEST_CORRUPT_SIGNATURES") == "1"


def window(now: float) -> tuple[int, int]:
    """(inception, expiration) of the signatures made now."""
    start = int(now) // DAY * DAY
    return start - 3600, start + VALIDITY_DAYS * DAY


def sign_reply(wire: bytes, zone: CompiledZone, keys: ZoneKeys, now: float) -> bytes:
    """The reply `wire` (for a query with DO=1, in `zone`) with its RRSIGs and denial."""
    message = dns.message.from_wire(wire)
    if not message.question:
        return wire
    question = message.question[0]
    origin = dns.name.from_text(zone.name)
    referral = not message.flags & dns.flags.AA and any(
        r.rdtype == dns.rdatatype.NS for r in message.authority
    )
    if referral:
        cut = next(r for r in message.authority if r.rdtype == dns.rdatatype.NS).name
        ds = _node_rrset(zone, cut, dns.rdatatype.DS)
        if ds is not None:
            message.authority += [ds, _rrsig(ds, keys, now, origin)]
        else:
            nsec = _nsec(zone, cut, origin, nxname=False, absent=dns.rdatatype.DS)
            message.authority += [nsec, _rrsig(nsec, keys, now, origin)]
        return message.to_wire(max_size=65535, want_shuffle=False)  # keep the draw's order
    message.answer = _with_signatures(message.answer, keys, now, origin)
    final = _final_name(question.name, message.answer)
    negative = message.rcode() == dns.rcode.NXDOMAIN or (
        message.rcode() == dns.rcode.NOERROR
        and any(r.rdtype == dns.rdatatype.SOA for r in message.authority)
    )  # dnsd puts the SOA in the authority section of negative answers only
    if negative:
        nxdomain = message.rcode() == dns.rcode.NXDOMAIN
        if nxdomain:
            message.set_rcode(dns.rcode.NOERROR)  # compact denial (RFC 9824 §3)
        nsec = _nsec(zone, final, origin, nxname=nxdomain, absent=question.rdtype)
        message.authority = [*message.authority, nsec]
    message.authority = _with_signatures(message.authority, keys, now, origin)
    cuts = [dns.name.from_text(c) for c in zone.cuts]
    message.additional = _with_signatures(
        message.additional, keys, now, origin,
        lambda r: r.rdtype in ADDRESS and not any(r.name.is_subdomain(c) for c in cuts),
    )  # fmt: skip
    return message.to_wire(max_size=65535, want_shuffle=False)  # keep the draw's order


def _with_signatures(
    rrsets: list[dns.rrset.RRset], keys: ZoneKeys, now: float, origin: dns.name.Name,
    signable: object = None,
) -> list[dns.rrset.RRset]:  # fmt: skip
    out = []
    for rrset in rrsets:
        if rrset.rdtype == dns.rdatatype.RRSIG:
            continue
        out.append(rrset)
        if signable is None or signable(rrset):  # type: ignore[operator]
            out.append(_rrsig(rrset, keys, now, origin))
    return out


def _rrsig(
    rrset: dns.rrset.RRset, keys: ZoneKeys, now: float, origin: dns.name.Name
) -> dns.rrset.RRset:
    key = keys.signer_for(rrset.rdtype)
    inception, expiration = window(now)
    cache_key = (
        rrset.name.canonicalize(), rrset.rdtype, rrset.ttl,
        tuple(sorted(rd.to_digestable(origin) for rd in rrset)), key.tag, inception,
    )  # fmt: skip
    found = _cache.get(cache_key)
    if found is not None:
        _cache.move_to_end(cache_key)
        return found
    rrsig = dns.dnssec.sign(
        rrset, key.private, origin, key.dnskey, inception=inception, expiration=expiration,
        origin=origin,
    )  # fmt: skip
    if CORRUPT_FOR_TESTS:
        signature = bytearray(rrsig.signature)
        signature[0] ^= 0xFF
        signed = dns.rrset.from_rdata(
            rrset.name, rrset.ttl, rrsig.replace(signature=bytes(signature))
        )
    else:
        signed = dns.rrset.from_rdata(rrset.name, rrset.ttl, rrsig)
    _cache[cache_key] = signed
    if len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return signed


def _final_name(qname: dns.name.Name, answer: list[dns.rrset.RRset]) -> dns.name.Name:
    """Where a CNAME chain in the answer ends (the name the denial is about)."""
    name = qname
    for _ in range(len(answer) + 1):
        step = next((r for r in answer if r.rdtype == dns.rdatatype.CNAME and r.name == name), None)
        if step is None:
            return name
        name = step[0].target
    return name


def _node_rrset(zone: CompiledZone, name: dns.name.Name, rdtype: int) -> dns.rrset.RRset | None:
    node = zone.nodes.get(name.to_text().lower())
    rrset = node.rrsets.get(rdtype) if node is not None else None
    if rrset is None:
        return None
    # From the RDATA's wire bytes (dnsd.rdata): no text round trip through dnslib.
    return dns.rrset.from_rdata_list(
        name, rrset.ttl, [to_dnspython(rdtype, rd) for rd in rrset.rdatas]
    )


def _nsec(
    zone: CompiledZone, name: dns.name.Name, origin: dns.name.Name, nxname: bool, absent: int
) -> dns.rrset.RRset:
    """The one NSEC of compact denial: at `name`, next `\\000.name`; its bitmap never
    holds `absent`, the type the answer says is not there."""
    if nxname:
        types = [dns.rdatatype.RRSIG, dns.rdatatype.NSEC, dns.rdatatype.NXNAME]
    else:
        text = name.to_text().lower()
        node = zone.nodes.get(text) or wildcard_node(zone, text)
        present = {*(node.rrsets if node else ()), *(LB_TYPES if node and node.lb else ())}
        types = sorted((present - {absent}) | {dns.rdatatype.RRSIG, dns.rdatatype.NSEC})
    following = dns.name.Name((b"\x00", *name.labels))
    rdata = dns.rdtypes.ANY.NSEC.NSEC(
        dns.rdataclass.IN, dns.rdatatype.NSEC, following,
        dns.rdtypes.ANY.NSEC.Bitmap.from_rdtypes([dns.rdatatype.RdataType.make(t) for t in types]),
    )  # fmt: skip
    return dns.rrset.from_rdata(name, zone.negative_ttl, rdata)
