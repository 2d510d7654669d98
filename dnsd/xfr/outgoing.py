"""Outgoing zone transfers (pure over a zone version): who may transfer, and the AXFR
(RFC 5936) or IXFR (RFC 1995) messages for a query.

* The ACL: the zone needs `transfer:`; the client's address must be in `allow`; when
  `keys` is set the query must carry a valid TSIG with one of them. No `transfer:` or an
  address outside: REFUSED. Missing TSIG, or a key not listed: NOTAUTH.
* AXFR: SOA, every record, SOA, in as many messages as needed (each at most
  `MESSAGE_BYTES`), the question in the first. Signed queries get every message signed
  (RFC 8945 §5.3.1).
* IXFR: the client's serial is current (or ahead) → one SOA; a journalled serial → one
  condensed difference (SOA new, SOA old, deleted, SOA new, added, SOA new); anything
  else → the whole zone in AXFR form (RFC 1995 §4).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Final

import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from dnsd.config.model import Transfer
from dnsd.dnsname import name_end
from dnsd.xfr.content import ZoneContent
from dnsd.xfr.serials import serial_gt
from dnsd.xfr.tsig import key_name

MESSAGE_BYTES: Final = 16_000  # records per message are added until about this size
AXFR: Final = 252
IXFR: Final = 251


def transfer_type(wire: bytes) -> int | None:
    """AXFR or IXFR when the (single) question asks for one; None otherwise. Cheap."""
    if len(wire) < 17 or wire[4:6] != b"\x00\x01":
        return None
    end = name_end(wire, 12, pointers=False)
    if end is None or end + 2 > len(wire):
        return None
    (qtype,) = struct.unpack_from("!H", wire, end)
    return qtype if qtype in (AXFR, IXFR) else None


@dataclass(frozen=True, slots=True)
class Refusal:
    rcode: int  # REFUSED or NOTAUTH
    reason: str  # for the log


def allowed(
    transfer: Transfer | None,
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
    query: dns.message.Message,
) -> Refusal | None:
    """None when the client may transfer the zone (its TSIG, if any, already checked)."""
    if transfer is None:
        return Refusal(dns.rcode.REFUSED, "the zone has no transfer: section")
    if address.version == 6 and address.ipv4_mapped:
        address = address.ipv4_mapped
    if not any(address in net for net in transfer.allow if net.version == address.version):
        return Refusal(dns.rcode.REFUSED, f"{address} is not in transfer.allow")
    if transfer.keys:
        used = key_name(query.keyring) if query.had_tsig else None
        if used is None:
            return Refusal(dns.rcode.NOTAUTH, "no TSIG (transfer.keys requires one)")
        if used not in {k.lower() for k in transfer.keys}:
            return Refusal(dns.rcode.NOTAUTH, f"key {used} is not in transfer.keys")
    return None


def refuse(query: dns.message.Message, rcode: int) -> dns.message.Message:
    response = dns.message.make_response(query)
    response.set_rcode(dns.rcode.Rcode(rcode))
    return response


def axfr(query: dns.message.Message, content: ZoneContent) -> list[dns.message.Message]:
    return whole_zone(query, content.soa, content.rrsets())


def whole_zone(
    query: dns.message.Message, soa: dns.rrset.RRset, rrsets: list[dns.rrset.RRset]
) -> list[dns.message.Message]:
    """SOA, everything, SOA (RFC 5936 §2.2): AXFR, and IXFR's fallback."""
    return _messages(query, [soa, *rrsets, soa])


def ixfr(
    query: dns.message.Message, current: ZoneContent, old: ZoneContent | None, asked: int | None
) -> list[dns.message.Message]:
    """The IXFR answer for a client at serial `asked` (None: no SOA in the query)."""
    form = ixfr_form(current, old, asked)
    if form == "current":
        return _messages(query, [current.soa])  # up to date (or ahead): nothing to send
    if form == "full" or old is None:
        return axfr(query, current)
    before, after = old.texts(), current.texts()
    deleted = _parse(sorted(before - after))
    added = _parse(sorted(after - before))
    return _messages(query, [current.soa, old.soa, *deleted, current.soa, *added, current.soa])


def ixfr_form(current: ZoneContent, old: ZoneContent | None, asked: int | None) -> str:
    """How IXFR answers a client at serial `asked`: `current` (the SOA alone: it is up to
    date or ahead), `incremental` (the difference from a journalled version) or `full`."""
    if asked is not None and not serial_gt(current.serial, asked):
        return "current"
    if old is None or asked is None or old.serial != asked:
        return "full"
    return "incremental"


def requested_serial(query: dns.message.Message) -> int | None:
    """IXFR: the serial in the authority section's SOA (RFC 1995 §3)."""
    for rrset in query.authority:
        if rrset.rdtype == dns.rdatatype.SOA and len(rrset):
            return int(rrset[0].serial)
    return None


def _parse(lines: list[str]) -> list[dns.rrset.RRset]:
    """Presentation lines → one RRset per line (IXFR sends records, not whole RRsets)."""
    out = []
    for line in lines:
        name, ttl, rdclass, rdtype, rdata = line.split(None, 4)
        out.append(dns.rrset.from_text(name, int(ttl), rdclass, rdtype, rdata))  # absolute names
    return out


def _messages(
    query: dns.message.Message, rrsets: list[dns.rrset.RRset]
) -> list[dns.message.Message]:
    """Split `rrsets` over messages of about MESSAGE_BYTES; SOA RRsets are never merged."""
    out: list[dns.message.Message] = []
    current = _response(query, first=True)
    size = 0
    for rrset in rrsets:
        estimate = sum(len(rd.to_digestable()) + len(rrset.name) + 12 for rd in rrset)
        if size and size + estimate > MESSAGE_BYTES:
            out.append(current)
            current, size = _response(query, first=False), 0
        current.answer.append(rrset)
        size += estimate
    out.append(current)
    return out


def _response(query: dns.message.Message, first: bool) -> dns.message.Message:
    response = dns.message.make_response(query)
    response.flags |= dns.flags.AA
    if not first:
        response.question = []  # RFC 5936 §2.2: the question in the first message only
    return response


def render(messages: list[dns.message.Message]) -> list[bytes]:
    """Wire form; signed messages are signed as one sequence (RFC 8945 §5.3.1)."""
    out = []
    context = None
    multi = len(messages) > 1
    for message in messages:
        out.append(message.to_wire(max_size=65535, multi=multi, tsig_ctx=context))
        context = message.tsig_ctx
    return out
