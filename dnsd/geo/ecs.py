"""EDNS Client Subnet (RFC 7871): parse the option from a query and build the echo."""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

ECS_OPTION = 8
FAMILY_BITS = {1: 32, 2: 128}


class EcsError(ValueError):
    """The option is malformed: the query gets FORMERR (RFC 7871 §7.1.1)."""


@dataclass(frozen=True, slots=True)
class ClientSubnet:
    family: int
    source_prefix: int
    address: ipaddress.IPv4Address | ipaddress.IPv6Address  # the network address
    raw_address: bytes  # as sent, echoed unchanged

    def echo(self, scope_prefix: int) -> bytes:
        """Option data for the reply, with SCOPE PREFIX-LENGTH ≤ SOURCE PREFIX-LENGTH."""
        scope = max(0, min(scope_prefix, self.source_prefix))
        return struct.pack("!HBB", self.family, self.source_prefix, scope) + self.raw_address


def parse_ecs(data: bytes) -> ClientSubnet:
    if len(data) < 4:
        raise EcsError("ECS option shorter than 4 bytes")
    family, source, scope = struct.unpack_from("!HBB", data)
    bits = FAMILY_BITS.get(family)
    if bits is None:
        raise EcsError(f"unknown ECS family {family}")
    if source > bits:
        raise EcsError(f"source prefix {source} longer than {bits}")
    if scope != 0:
        raise EcsError("scope prefix must be 0 in a query")
    raw = data[4:]
    if len(raw) != (source + 7) // 8:
        raise EcsError("address length does not match the source prefix")
    padded = raw + b"\x00" * (bits // 8 - len(raw))
    value = int.from_bytes(padded, "big")
    host_bits = bits - source
    if host_bits and value & ((1 << host_bits) - 1):
        raise EcsError("address has bits set beyond the source prefix")
    address = ipaddress.IPv4Address(value) if family == 1 else ipaddress.IPv6Address(value)
    return ClientSubnet(family, source, address, raw)
