"""RDATA held one way: read once by dnspython (text or wire), kept as its wire bytes.

Every record's RDATA is parsed by dnspython — from a zone file, a YAML value, an RFC 3597
`\\# n hex` form — and stored as the uncompressed wire bytes dnspython writes. Replies,
transfers, exports and signatures all start from those bytes; nothing is re-read from
text by a second library (dnslib's text reader reads `\\DDD` as octal and re-encodes
bytes >= 0x80).

For the few types the lookup reads inside (a CNAME's target, NS/MX/SRV names for the
additional section, the SOA's fields), the bytes are handed to dnslib's own wire parser,
whose objects pack back to the same bytes (names compressed where RFC 3597 §4 allows it:
NS, CNAME, PTR, MX, SOA; SRV's target never). A and AAAA are their wire bytes with dnslib's
behaviour (`WireA`, `WireAAAA`). Every other type is a raw `RD`, packed as is.
"""

from __future__ import annotations

import functools
import re
from ipaddress import IPv4Address, IPv6Address
from typing import Final

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
from dnslib import AAAA, CNAME, MX, NS, PTR, RD, RR, SOA, SRV, A, DNSBuffer

from dnsd.dnsname import key_of_labels


class _WireAddress(bytes):
    """An address record's RDATA as its wire bytes, and the dnslib record type beside it
    (`WireA`, `WireAAAA`): it packs, prints and compares as dnslib's own does, in 64
    bytes instead of 152–208 (an instance dict and a tuple of ints) — most of a big
    zone's memory per record."""

    __slots__ = ()
    SIZE: int = 0

    def __init__(self, *_: object) -> None:  # bytes.__new__ holds the value
        pass

    @property
    def data(self) -> tuple[int, ...]:
        return tuple(self)

    @classmethod
    def parse(cls, buffer: DNSBuffer, length: int) -> _WireAddress:
        if length != cls.SIZE:
            raise ValueError(f"{length} bytes of RDATA where an address has {cls.SIZE}")
        return cls(buffer.get(length))

    def pack(self, buffer: DNSBuffer) -> None:
        buffer.append(bytes(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _WireAddress):
            return type(other) is type(self) and bytes.__eq__(self, other)
        if isinstance(other, RD):  # dnslib's own A or AAAA of the same address
            return isinstance(self, type(other)) and tuple(self) == other.data
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = bytes.__hash__


class WireA(_WireAddress, A):
    __slots__ = ()
    SIZE = 4
    __repr__ = __str__ = A.__repr__


class WireAAAA(_WireAddress, AAAA):
    __slots__ = ()
    SIZE = 16
    __repr__ = __str__ = AAAA.__repr__


# Types held as dnslib objects, read from the wire bytes (see the module docstring).
TYPED: Final[dict[int, type[RD]]] = {
    1: WireA,
    2: NS,
    5: CNAME,
    6: SOA,
    12: PTR,
    15: MX,
    28: WireAAAA,
    33: SRV,
}
# Type numbers the answer path compares: dnslib's QTYPE.X is a __getattr__ each time.
TYPE_A: Final = 1
TYPE_NS: Final = 2
TYPE_CNAME: Final = 5
TYPE_TXT: Final = 16
TYPE_AAAA: Final = 28
TYPE_DNAME: Final = 39
TYPE_DS: Final = 43
TYPE_ANY: Final = 255
# RRSIG NSEC NSEC3 NSEC3PARAM: dnsd signs zones itself (`dnssec:`); hand-written ones
# would contradict the answers it signs. SOA comes from the `soa` section or the file.
NOT_CONFIGURABLE: Final = frozenset({6, 46, 47, 50, 51})
# DNSKEY CDS CDNSKEY: served as written in an unsigned zone; a signed zone makes its own.
SIGNER_MANAGED: Final = frozenset({48, 59, 60})
_DOTTED_QUAD: Final = re.compile(r"(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}")
NXNAME: Final = 128  # RFC 9824's meta type (dnspython may not call it one)


@functools.lru_cache(maxsize=512)
def type_problem(rtype: int) -> str | None:
    """Why records of this type cannot be configured, or None."""
    if (
        dns.rdatatype.is_metatype(dns.rdatatype.RdataType.make(rtype))
        or rtype == NXNAME
        or rtype == 0
    ):
        return "a meta type (RFC 6895 §3.1) is not a record type"
    if rtype in NOT_CONFIGURABLE:
        if rtype == 6:
            return "the SOA comes from the zone's soa section or its file's SOA record"
        return "dnsd writes DNSSEC signatures and denial records itself (dnssec:)"
    return None


@functools.lru_cache(maxsize=512)
def type_number(text: str) -> int | None:
    """A type mnemonic or `TYPEnnn` → its number, or None when dnspython does not know it."""
    try:
        return int(dns.rdatatype.from_text(text))
    except (dns.rdatatype.UnknownRdatatype, ValueError):
        return None


@functools.lru_cache(maxsize=512)
def type_text(rtype: int) -> str:
    return dns.rdatatype.to_text(dns.rdatatype.RdataType.make(rtype))


def from_text(rtype: int, text: str, origin: str) -> RD:
    """Presentation text (relative names under `origin`) → RDATA. Raises on bad text."""
    if rtype == 1 or rtype == 28:  # an address has one spelling: ipaddress reads it 5x faster
        address = text.strip()
        if rtype == 1 and _DOTTED_QUAD.fullmatch(address):
            octets = tuple(map(int, address.split(".")))
            if max(octets) <= 255:  # what IPv4Address accepts: no leading zeros, each <= 255
                return WireA(bytes(octets))
        if "\\" not in address and not address.startswith('"'):
            if rtype == 1:
                return WireA(IPv4Address(address).packed)
            return WireAAAA(IPv6Address(address).packed)
    rdata = dns.rdata.from_text(
        dns.rdataclass.IN,
        dns.rdatatype.RdataType.make(rtype),
        text,
        origin=_origin(origin),
        relativize=False,
    )
    return from_dnspython(rdata)


@functools.lru_cache(maxsize=64)
def _origin(origin: str) -> dns.name.Name:
    return dns.name.from_text(origin)


def from_dnspython(rdata: dns.rdata.Rdata) -> RD:
    return from_wire(int(rdata.rdtype), rdata.to_wire() or b"")


def from_wire(rtype: int, wire: bytes) -> RD:
    cls = TYPED.get(rtype)
    if cls is None:
        return RD(bytes(wire))
    return cls.parse(DNSBuffer(wire), len(wire))


def to_wire(rd: RD) -> bytes:
    """The RDATA's uncompressed wire bytes (a fresh buffer has nothing to point at)."""
    if isinstance(rd, bytes):  # WireA, WireAAAA
        return bytes(rd)
    if rd.__class__ is RD:
        return bytes(rd.data)
    buffer = DNSBuffer()
    rd.pack(buffer)
    return bytes(buffer.data)


def to_dnspython(rtype: int, rd: RD) -> dns.rdata.Rdata:
    wire = to_wire(rd)
    return dns.rdata.from_wire(
        dns.rdataclass.IN, dns.rdatatype.RdataType.make(rtype), wire, 0, len(wire)
    )


def to_text(rtype: int, rd: RD) -> str:
    """Presentation form with absolute names (dnspython's)."""
    return str(to_dnspython(rtype, rd).to_text(origin=None, relativize=False))


def target(rtype: int, rd: RD) -> str | None:
    """The key of the name a CNAME, DNAME, NS, PTR, MX, SRV, SVCB or HTTPS record points
    at, else None."""
    if rtype in (2, 5, 12, 15):
        return key_of_labels(rd.label.label)
    if rtype == 33:
        return key_of_labels(rd.target.label)
    if rtype == TYPE_DNAME:
        return key_of_labels(dns.name.from_wire(to_wire(rd), 0)[0].labels[:-1])
    if rtype in (64, 65):  # SVCB, HTTPS: priority, then the target ("." is the owner: none)
        name = dns.name.from_wire(to_wire(rd), 2)[0]
        return key_of_labels(name.labels[:-1]) if len(name) > 1 else None
    return None


SVC_TYPES: Final = frozenset({64, 65})  # SVCB, HTTPS


@functools.lru_cache(maxsize=4096)
def with_hints(rtype: int, wire: bytes, v4: tuple[str, ...], v6: tuple[str, ...]) -> bytes:
    """An SVCB or HTTPS record's RDATA with `ipv4hint`/`ipv6hint` set to these addresses
    (RFC 9460 §7.3), a hint without addresses removed — when its TargetName is "." (the
    owner's own addresses: the load-balanced name's). AliasMode (priority 0, no SvcParams)
    and records pointing at another name (the hints are that name's) are unchanged, as is
    a record the change would make invalid (a `mandatory` key naming a hint that goes)."""
    from dns.rdtypes.svcbbase import IPv4HintParam, IPv6HintParam, ParamKey

    rdata = to_dnspython(rtype, RD(wire))
    if rdata.priority == 0 or rdata.target != dns.name.root:  # type: ignore[attr-defined]
        return wire
    params = dict(rdata.params)  # type: ignore[attr-defined]
    for key, addresses, param in (
        (ParamKey.IPV4HINT, v4, IPv4HintParam),
        (ParamKey.IPV6HINT, v6, IPv6HintParam),
    ):
        if addresses:
            params[key] = param(addresses)
        else:
            params.pop(key, None)
    try:
        return bytes(rdata.replace(params=params).to_wire() or b"")
    except Exception:  # dnspython refuses the result: serve what was configured
        return wire


def record_text(rr: RR) -> str:
    """One reply record in zone-file form, its RDATA as dnspython writes it (a raw `RD` has
    no text of its own in dnslib but `\\# n hex`)."""
    owner = key_of_labels(rr.rname.label)
    rtype = int(rr.rtype)
    try:
        data = to_text(rtype, rr.rdata)
    except Exception:  # not a type dnspython reads (OPT and the like): dnslib's own text
        data = rr.rdata.toZone()
    return f"{owner} {rr.ttl} IN {type_text(rtype)} {data}"
