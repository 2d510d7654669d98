"""A small blocking DNS client for tests: real sockets, dnslib for the wire format."""

from __future__ import annotations

import socket
import struct

from dnslib import EDNS0, DNSRecord

TIMEOUT_S = 2.0


def make_query(
    name: str, qtype: str = "A", *, edns: bool = False, payload: int = 1232, rd: bool = True
) -> DNSRecord:
    q = DNSRecord.question(name, qtype)
    q.header.rd = int(rd)
    if edns:
        q.add_ar(EDNS0(udp_len=payload))
    return q


def udp_raw(
    port: int, wire: bytes, host: str = "127.0.0.1", timeout: float = TIMEOUT_S
) -> bytes | None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(wire, (host, port))
        try:
            return s.recv(65535)
        except TimeoutError:
            return None


def tcp_raw(port: int, wire: bytes, host: str = "127.0.0.1", timeout: float = TIMEOUT_S) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack("!H", len(wire)) + wire)
        return read_frame(s)


def read_frame(s: socket.socket) -> bytes:
    (length,) = struct.unpack("!H", recv_exactly(s, 2))
    return recv_exactly(s, length)


def recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def ask(port: int, name: str, qtype: str = "A", *, tcp: bool = False, **kw: object) -> DNSRecord:
    wire = make_query(name, qtype, **kw).pack()  # type: ignore[arg-type]
    raw = tcp_raw(port, wire) if tcp else udp_raw(port, wire)
    assert raw is not None, f"no answer for {name} {qtype}"
    return DNSRecord.parse(raw)
