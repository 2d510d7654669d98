"""DNSSEC signatures made from wire bytes (RFC 4034 §3.1.8.1, §6): the RRSIG RDATA, the
canonical form of an RRset, the signature itself from the `cryptography` key object, and
the pieces of compact denial (RFC 9824) — the NSEC type bitmap and the next name.

The per-answer work of online signing is here: one signature over bytes prepared once
per zone and day, no dnspython objects per query (a random-name flood costs
one signature per answer, not a message parse and re-render)."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from functools import cache
from typing import Any, Final

from dnsd.dnsname import wire_labels
from dnsd.zone_keys import ZoneKey

NSEC: Final = 47
RRSIG: Final = 46
SOA: Final = 6
OPT: Final = 41
NXNAME: Final = 128  # RFC 9824 §3.1: the meta-type that marks a nonexistent name
CO_FLAG: Final = 0x4000  # EDNS header flag "compact answers OK" (RFC 9824 §4), after DO
MAX_NAME: Final = 255


@cache
def _ecdsa() -> Any:
    """RFC 6979 deterministic ECDSA: the same RRset signs to the same bytes, so a cached reply
    and the full path's agree byte for byte, and no signature depends on the random source.
    Made at the first signature: a server without signed zones never loads the crypto."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.ECDSA(hashes.SHA256(), deterministic_signing=True)


def signature(key: ZoneKey, data: bytes) -> bytes:
    """The signature field of an RRSIG over `data` (RFC 6605 §4: r | s for ECDSA)."""
    if key.algorithm == 13:
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        r, s = decode_dss_signature(key.private.sign(data, _ecdsa()))  # type: ignore[call-arg]
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return key.private.sign(data)  # type: ignore[call-arg]  # Ed25519: 64 bytes as is


def label_count(owner: bytes) -> int:
    """RRSIG Labels (RFC 4034 §3.1.3): the owner's labels, the root and a leading `*` not
    counted."""
    count = len(wire_labels(owner))
    return count - 1 if owner[:2] == b"\x01*" else count


def rrsig_head(
    key: ZoneKey,
    covered: int,
    owner: bytes,
    ttl: int,
    inception: int,
    expiration: int,
    signer: bytes,
) -> bytes:
    """The RRSIG RDATA before its signature field: what the signature covers first."""
    return (
        struct.pack(
            "!HBBIIIH",
            covered,
            key.algorithm,
            label_count(owner),
            ttl,
            expiration,
            inception,
            key.tag,
        )
        + signer
    )


def canonical_rrset(owner: bytes, rtype: int, ttl: int, rdatas: Iterable[bytes]) -> bytes:
    """RFC 4034 §6.3: every RR in canonical form (owner in lower case, uncompressed RDATA
    in canonical form), ordered by RDATA, duplicates once."""
    head = owner.lower() + struct.pack("!HHI", rtype, 1, ttl)
    return b"".join(head + struct.pack("!H", len(rdata)) + rdata for rdata in sorted(set(rdatas)))


def rr(owner: bytes, rtype: int, ttl: int, rdata: bytes) -> bytes:
    """One resource record on the wire (`owner` already in wire form, maybe a pointer)."""
    return owner + struct.pack("!HHIH", rtype, 1, ttl, len(rdata)) + rdata


def bitmap(types: Iterable[int]) -> bytes:
    """The NSEC type bit maps field (RFC 4034 §4.1.2)."""
    windows: dict[int, bytearray] = {}
    for rtype in sorted(set(types)):
        window = windows.setdefault(rtype >> 8, bytearray())
        octet = (rtype & 0xFF) >> 3
        if len(window) <= octet:
            window.extend(b"\x00" * (octet + 1 - len(window)))
        window[octet] |= 0x80 >> (rtype & 7)
    return b"".join(bytes([number, len(bits)]) + bits for number, bits in sorted(windows.items()))


NXNAME_BITMAP: Final = bitmap((RRSIG, NSEC, NXNAME))


def successor(name: bytes) -> bytes:
    """The next name of a compact-denial NSEC: the immediate successor of `name` (lower
    case, wire form) in canonical order (RFC 4471 §3.1.2). Usually `\\000.name`; a name of
    254–255 octets has no room for another label, so its first label grows by a zero
    octet, or (at 255 octets or 63 in the label) its last octet is incremented — no name
    lies between, since any name that did would be longer than 255 octets."""
    if len(name) + 2 <= MAX_NAME:
        return b"\x01\x00" + name
    size = name[0]
    if len(name) < MAX_NAME and size < 63:
        return bytes([size + 1]) + name[1 : 1 + size] + b"\x00" + name[1 + size :]
    return _incremented(name)


def _incremented(name: bytes) -> bytes:
    """`name` with the last octet of its first label incremented, trailing 0xFF octets
    dropped first (names of 255 octets: nothing longer can lie between)."""
    size = name[0]
    label, rest = bytearray(name[1 : 1 + size]), name[1 + size :]
    while label:
        octet = label.pop() + 1
        if octet <= 0xFF:
            label.append(0x5B if 0x41 <= octet <= 0x5A else octet)  # A-Z sort as a-z
            return bytes([len(label)]) + bytes(label) + rest
    return _after_subtree(rest)  # a label of 0xFF octets only: past its parent's subtree


def _after_subtree(name: bytes) -> bytes:
    """The first name after `name` and every name below it."""
    size = name[0]
    if size < 63:
        return bytes([size + 1]) + name[1 : 1 + size] + b"\x00" + name[1 + size :]
    return _incremented(name)
