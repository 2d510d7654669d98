"""The tests' own DNS client takes only the reply to its query (stray datagrams
counted as wrong answers)."""

from __future__ import annotations

import socket
import threading

from dnslib import DNSRecord

from tests.dnsclient import udp_raw


def test_a_stray_datagram_is_not_taken_for_the_reply() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        query = DNSRecord.question("asked.test")

        def serve() -> None:
            wire, client = server.recvfrom(512)
            asked = DNSRecord.parse(wire)
            other = DNSRecord.question("other.test")  # another query's late reply
            other.header.id = asked.header.id
            server.sendto(other.reply().pack(), client)
            wrong_id = asked.reply()
            wrong_id.header.id = (asked.header.id + 1) % 65536
            server.sendto(wrong_id.pack(), client)
            server.sendto(asked.reply().pack(), client)

        thread = threading.Thread(target=serve)
        thread.start()
        raw = udp_raw(server.getsockname()[1], query.pack())
        thread.join()
    assert raw is not None
    reply = DNSRecord.parse(raw)
    assert reply.header.id == query.header.id and str(reply.q.qname) == "asked.test."


def test_no_reply_is_none() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        assert (
            udp_raw(silent.getsockname()[1], DNSRecord.question("x.test").pack(), timeout=0.2)
            is None
        )
