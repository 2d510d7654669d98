"""Online signing (RFC 4033–4035): a reply to a DO=1 query for a signed zone gets an RRSIG
for every RRset it carries, made as it leaves and cached per (RRset, key, window).

* Positive answers, CNAMEs, the SOA of negative answers, DNSKEY/CDS/CDNSKEY, and address
  records in the additional section are signed; a referral's NS set and its glue are not
  (they are the child's), but a referral carries the signed DS set or a signed NSEC that
  proves there is none.
* Denial is compact (RFC 9824): NXDOMAIN is answered NOERROR with one NSEC at the name
  whose next name is `\\000.name` and whose bitmap holds RRSIG, NSEC and NXNAME; NODATA with
  one NSEC at the name listing its types. Each NSEC covers only that name: nothing to walk.
  A query with the CO flag (RFC 9824 §4) gets the rcode NXDOMAIN back, and the flag.
* A query for type NSEC is answered with that NSEC, as an answer (what Knot's online
  signing does): a NODATA whose NSEC lists NSEC would contradict itself.
* A wildcard answer is signed as the query name itself (an online signer may: the answer
  then needs no proof of non-existence, and validators see an ordinary answer).
* Signatures hold from an hour before the start of the current day to seven days after
  it; a new day makes new ones, so no signature served is ever less than six days from
  expiry. At most `CACHE_SIZE` signatures are kept (least recently used go first).

Negative answers — what a random-name flood asks for — take a wire-level path
(`dnsd.dnssec.denial`): one signature over prepared bytes per answer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Final

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from dnsd.dnssec import wire
from dnsd.dnssec.denial import nsec_types, sign_negative
from dnsd.dnssec.signature import make_signature, window
from dnsd.rdata import to_dnspython
from dnsd.snapshot import CompiledZone
from dnsd.zone_keys import ZoneKeys

CACHE_SIZE: Final = 200_000
ADDRESS = (dns.rdatatype.A, dns.rdatatype.AAAA)

_cache: OrderedDict[tuple[object, ...], dns.rrset.RRset] = OrderedDict()


def sign_reply(
    wire_bytes: bytes, zone: CompiledZone, keys: ZoneKeys, now: float, co: bool = False
) -> bytes:
    """The reply `wire_bytes` (for a query with DO=1, in `zone`) with its RRSIGs and
    denial; `co`: the query set the CO flag."""
    fast = sign_negative(wire_bytes, zone, keys, now, co)
    if fast is not None:
        return fast
    message = dns.message.from_wire(wire_bytes)
    if not message.question:
        return wire_bytes
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
            nsec = _nsec(zone, cut, nxname=False, absent=dns.rdatatype.DS)
            message.authority += [nsec, _rrsig(nsec, keys, now, origin)]
        return _to_wire(message, co)
    message.answer = _with_signatures(message.answer, keys, now, origin)
    final = _final_name(question.name, message.answer)
    negative = message.rcode() == dns.rcode.NXDOMAIN or (
        message.rcode() == dns.rcode.NOERROR
        and any(r.rdtype == dns.rdatatype.SOA for r in message.authority)
    )  # dnsd puts the SOA in the authority section of negative answers only
    if negative:
        nxdomain = message.rcode() == dns.rcode.NXDOMAIN
        message.set_rcode(dns.rcode.NXDOMAIN if nxdomain and co else dns.rcode.NOERROR)
        nsec = _nsec(zone, final, nxname=nxdomain, absent=question.rdtype)
        if question.rdtype == dns.rdatatype.NSEC and not (nxdomain and co):
            message.authority = [r for r in message.authority if r.rdtype != dns.rdatatype.SOA]
            message.answer += [nsec, _rrsig(nsec, keys, now, origin)]
        else:
            message.authority = [*message.authority, nsec]
    message.authority = _with_signatures(message.authority, keys, now, origin)
    cuts = [dns.name.from_text(c) for c in zone.cuts]
    message.additional = _with_signatures(
        message.additional,
        keys,
        now,
        origin,
        lambda r: r.rdtype in ADDRESS and not any(r.name.is_subdomain(c) for c in cuts),
    )
    return _to_wire(message, co)


def _to_wire(message: dns.message.Message, co: bool) -> bytes:
    if co and message.edns >= 0:
        message.ednsflags |= wire.CO_FLAG  # echoed (RFC 9824 §4)
    return message.to_wire(max_size=65535, want_shuffle=False)  # keep the draw's order


def _with_signatures(
    rrsets: list[dns.rrset.RRset],
    keys: ZoneKeys,
    now: float,
    origin: dns.name.Name,
    signable: Callable[[dns.rrset.RRset], bool] | None = None,
) -> list[dns.rrset.RRset]:
    out = []
    for rrset in rrsets:
        if rrset.rdtype == dns.rdatatype.RRSIG:
            continue
        out.append(rrset)
        if signable is None or signable(rrset):
            out.append(_rrsig(rrset, keys, now, origin))
    return out


def _rrsig(
    rrset: dns.rrset.RRset, keys: ZoneKeys, now: float, origin: dns.name.Name
) -> dns.rrset.RRset:
    key = keys.signer_for(rrset.rdtype)
    inception, expiration = window(now)
    owner = rrset.name.canonicalize().to_wire()
    rdatas = tuple(sorted(rd.to_digestable(origin) for rd in rrset))
    cache_key = (owner, rrset.rdtype, rrset.ttl, rdatas, key.tag, inception)
    found = _cache.get(cache_key)
    if found is not None:
        _cache.move_to_end(cache_key)
        return found
    signer = origin.canonicalize().to_wire()
    assert owner is not None and signer is not None
    head = wire.rrsig_head(key, rrset.rdtype, owner, rrset.ttl, inception, expiration, signer)
    sig = make_signature(key, head + wire.canonical_rrset(owner, rrset.rdtype, rrset.ttl, rdatas))
    rdata = dns.rdata.from_wire(
        dns.rdataclass.IN, dns.rdatatype.RRSIG, head + sig, 0, len(head) + len(sig)
    )
    signed = dns.rrset.from_rdata(rrset.name, rrset.ttl, rdata)
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


def _nsec(zone: CompiledZone, name: dns.name.Name, nxname: bool, absent: int) -> dns.rrset.RRset:
    """The one NSEC of compact denial: at `name`, next its immediate successor."""
    owner = name.canonicalize().to_wire()
    assert owner is not None
    types = nsec_types(zone, name.to_text().lower(), nxname, absent)
    rdata = wire.successor(owner) + wire.bitmap(types)
    nsec = dns.rdata.from_wire(dns.rdataclass.IN, dns.rdatatype.NSEC, rdata, 0, len(rdata))
    return dns.rrset.from_rdata(name, zone.negative_ttl, nsec)
