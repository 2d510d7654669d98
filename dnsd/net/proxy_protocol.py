"""PROXY protocol version 2 (haproxy's doc/proxy-protocol.txt), as dnsdist
(`useProxyProtocol`) and haproxy (`send-proxy-v2`) send it in front of a DNS server.

Behind a balancer every query comes from the balancer's address; the header it puts first
carries the client's. `--proxy-protocol-from CIDR,…` names the peers that must send one:
from them the carried address is the client for everything (location, RRL, transfer ACLs,
cookies, logs). A peer not listed may not send one (anyone could claim any address).
Everything else is dropped and counted by reason in `dnsd_proxy_protocol_dropped_total`.

`parse` is pure: bytes → the carried source and the payload after the header, or a drop
reason. The header is bounded (MAX_BODY) before anything waits for it or copies it.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily

SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
FIXED = 16  # signature, version/command, family/protocol, length
# The address block is 12 (IPv4), 36 (IPv6) or 216 (unix) bytes; TLVs follow. dnsdist and
# haproxy send a few TLVs at most: a longer header is refused before it is read.
MAX_BODY = 512
LOCAL, PROXY = 0x0, 0x1
_ADDRESSES = {0x1: (socket.AF_INET, 4, 12), 0x2: (socket.AF_INET6, 16, 36)}  # family nibble
UNSPEC, UNIX = 0x0, 0x3

# Drop reasons, the `reason` label's values.
MISSING = "missing"  # a listed peer sent no header
TRUNCATED = "truncated"  # shorter than its own length field says
TOO_LONG = "too_long"  # a length past MAX_BODY
BAD_VERSION = "bad_version"  # not version 2
BAD_COMMAND = "bad_command"  # neither LOCAL nor PROXY
BAD_FAMILY = "bad_family"  # PROXY for a family dnsd does not serve (unix, unspecified, other)
BAD_ADDRESS = "bad_address"  # the address block is shorter than its family needs
UNLISTED = "unlisted_peer"  # a header from a peer not in --proxy-protocol-from
REASONS = (
    MISSING,
    TRUNCATED,
    TOO_LONG,
    BAD_VERSION,
    BAD_COMMAND,
    BAD_FAMILY,
    BAD_ADDRESS,
    UNLISTED,
)


@dataclass(frozen=True, slots=True)
class Header:
    """A parsed header: the carried source (None for LOCAL: the peer speaks for itself, a
    health check) and where the payload starts."""

    host: str | None
    port: int | None
    length: int  # of the header: the payload starts here


def header_length(fixed: bytes) -> int | str:
    """From the first 16 bytes: the header's whole length, or a drop reason (TCP reads
    this much before it reads any more)."""
    if len(fixed) < FIXED:
        return MISSING if not SIGNATURE.startswith(fixed[:12]) else TRUNCATED
    if fixed[:12] != SIGNATURE:
        return MISSING
    if fixed[12] >> 4 != 2:
        return BAD_VERSION
    (body,) = struct.unpack_from("!H", fixed, 14)
    if body > MAX_BODY:
        return TOO_LONG
    return FIXED + body


def parse(data: bytes) -> Header | str:
    """The PROXY v2 header at the start of `data`, or why it is refused."""
    length = header_length(data[:FIXED])
    if isinstance(length, str):
        return length
    if len(data) < length:
        return TRUNCATED
    command, family, proto = data[12] & 0x0F, data[13] >> 4, data[13] & 0x0F
    if command == LOCAL:
        return Header(None, None, length)  # addresses (if any) and TLVs are ignored
    if command != PROXY:
        return BAD_COMMAND
    spec = _ADDRESSES.get(family)
    if spec is None or proto not in (0x1, 0x2):  # STREAM or DGRAM
        return BAD_FAMILY
    af, size, block = spec
    if length - FIXED < block:
        return BAD_ADDRESS
    host = socket.inet_ntop(af, data[FIXED : FIXED + size])
    (port,) = struct.unpack_from("!H", data, FIXED + 2 * size)
    return Header(host, port, length)  # TLVs after the addresses are skipped


class NetworksError(argparse.ArgumentTypeError, ValueError):
    """A bad --proxy-protocol-from: argparse and the server file print its message as is."""


def parse_networks(text: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """`--proxy-protocol-from CIDR[,CIDR…]` → networks (a bare address is its /32 or /128)."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise NetworksError(f"{item!r} is not an address or network (CIDR)") from None
    if not out:
        raise NetworksError("expected one or more networks, e.g. 127.0.0.1/32")
    return out


class ProxyGate:
    """Which peers must send a header, and the drops by reason. One per server, shared by
    every listener (counters are plain integers under the GIL)."""

    def __init__(self, networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> None:
        self.networks = tuple(networks)
        self.dropped = dict.fromkeys(REASONS, 0)
        self._listed: dict[str, bool] = {}  # bounded: cleared when it grows past 4096 peers

    def listed(self, host: str) -> bool:
        known = self._listed.get(host)
        if known is None:
            if len(self._listed) >= 4096:
                self._listed.clear()
            address = ipaddress.ip_address(host.split("%", 1)[0])
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            known = self._listed[host] = any(address in net for net in self.networks)
        return known

    def drop(self, reason: str) -> None:
        self.dropped[reason] += 1

    def unwrap(self, data: bytes, host: str, port: int) -> tuple[bytes, str, int] | None:
        """A datagram from (host, port) → (the query, its client's host and port), or None
        when it is dropped (and counted)."""
        if not self.listed(host):
            if data[:12] == SIGNATURE:
                self.drop(UNLISTED)
                return None
            return data, host, port
        header = parse(data)
        if isinstance(header, str):
            self.drop(header)
            return None
        payload = data[header.length :]
        if header.host is None or header.port is None:
            return payload, host, port  # LOCAL: the peer itself
        return payload, header.host, header.port

    def split(self, data: bytes, host: str) -> tuple[int, bytes] | None:
        """For the compiled loop: (where the query starts, the carried address packed, or
        b"" for the sender itself), or None when dropped (counted). The common header (IPv4
        or IPv6, PROXY, UDP) is read without building strings."""
        if not self.listed(host):
            if data[:12] == SIGNATURE:
                self.drop(UNLISTED)
                return None
            return 0, b""
        if len(data) >= 28 and data[:12] == SIGNATURE:
            fam, length = data[12:14], FIXED + (data[14] << 8 | data[15])
            if length <= len(data) and length <= FIXED + MAX_BODY:
                if fam == b"\x21\x12" and length >= 28:
                    return length, data[16:20]
                if fam == b"\x21\x22" and length >= 52:
                    return length, data[16:32]
        header = parse(data)
        if isinstance(header, str):
            self.drop(header)
            return None
        if header.host is None:
            return header.length, b""
        af = socket.AF_INET6 if ":" in header.host else socket.AF_INET
        return header.length, socket.inet_pton(af, header.host)

    def collect(self) -> Iterator[CounterMetricFamily]:
        """Its Prometheus collector (Metrics.register)."""
        dropped = CounterMetricFamily(
            "dnsd_proxy_protocol_dropped",
            "Queries and connections dropped for a missing, bad or unexpected PROXY v2 header",
            labels=["reason"],
        )
        for reason, count in self.dropped.items():
            dropped.add_metric([reason], count)
        yield dropped
