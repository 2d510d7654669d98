"""A small blocking DNS client for tests: real sockets, dnslib for the wire format."""

from __future__ import annotations

import socket
import struct
import time

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
    """The reply to `wire`: from that server, with the query's ID and question (a stray
    datagram — a late reply to an earlier query on a reused port — is not an answer)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    deadline = time.monotonic() + timeout
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((host, port))  # the kernel drops datagrams from anyone else
        s.send(wire)
        while (left := deadline - time.monotonic()) > 0:
            s.settimeout(left)
            try:
                reply = s.recv(65535)
            except (TimeoutError, ConnectionRefusedError):
                return None
            if answers_query(wire, reply):
                return reply
        return None


def answers_query(query: bytes, reply: bytes) -> bool:
    """Same ID; and the same question where both carry one (a FORMERR may carry none)."""
    if len(query) < 12:
        return True  # no ID to match: anything the server sends back is its reply
    if reply[:2] != query[:2]:
        return False
    asked, echoed = question_of(query), question_of(reply)
    return asked is None or echoed is None or asked.lower() == echoed.lower()


def question_of(wire: bytes) -> bytes | None:
    """The first question's wire bytes (name, type, class), or None when there is none."""
    if len(wire) < 12 or struct.unpack_from("!H", wire, 4)[0] == 0:
        return None
    at = 12
    while at < len(wire) and wire[at] != 0:
        if wire[at] & 0xC0:
            return None  # a pointer in a question: not comparable byte for byte
        at += 1 + wire[at]
    end = at + 5
    return wire[12:end] if end <= len(wire) else None


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
