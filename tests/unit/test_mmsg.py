"""Batched UDP I/O (dnsd.net.mmsg) on real loopback sockets, IPv4 and IPv6."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Iterator

import pytest

from dnsd.net import mmsg


@contextlib.contextmanager
def _pair(family: int, host: str) -> Iterator[tuple[socket.socket, list[socket.socket]]]:
    """A bound server socket and three bound client sockets, closed afterwards."""
    server = socket.socket(family, socket.SOCK_DGRAM)
    clients = [socket.socket(family, socket.SOCK_DGRAM) for _ in range(3)]
    try:
        server.bind((host, 0))
        for c in clients:
            c.bind((host, 0))
            c.settimeout(2)
        yield server, clients
    finally:
        server.close()
        for c in clients:
            c.close()


@pytest.mark.parametrize(
    ("family", "host"), [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")]
)
def test_a_batch_arrives_whole_and_each_reply_reaches_its_sender(family: int, host: str) -> None:
    assert mmsg.available()
    with _pair(family, host) as (server, clients):
        batch = mmsg.DatagramBatch(server, size=8)
        port = server.getsockname()[1]
        for i, c in enumerate(clients):
            c.sendto(b"query-%d" % i, (host, port))
        received: list[tuple[bytes, tuple[str, int]]] = []
        while len(received) < 3:
            count = batch.receive()
            keys = batch.source_keys(count)
            for i, data in enumerate(batch.datagrams(count)):
                assert data is not None
                received.append((data, batch.source(i)))
                packed = socket.inet_pton(family, batch.source(i)[0])
                assert keys[i] == (
                    int.from_bytes(packed, sys.byteorder) if family == socket.AF_INET else packed
                )
                batch.queue(i, b"reply-to-" + data)
            assert batch.flush() == 0
        by_port = {c.getsockname()[1]: c for c in clients}
        assert sorted(d for d, _ in received) == [b"query-0", b"query-1", b"query-2"]
        for data, (src, src_port) in received:
            assert src == host
            assert by_port[src_port].recv(100) == b"reply-to-" + data


def test_an_oversized_datagram_is_reported_not_truncated_silently() -> None:
    with _pair(socket.AF_INET, "127.0.0.1") as (server, clients):
        batch = mmsg.DatagramBatch(server, size=4)
        port = server.getsockname()[1]
        clients[0].sendto(b"x" * (mmsg.SLOT + 10), ("127.0.0.1", port))
        clients[1].sendto(b"small", ("127.0.0.1", port))
        seen: list[bytes | None] = []
        while len(seen) < 2:
            seen += batch.datagrams(batch.receive())
        assert seen == [None, b"small"]


def test_a_reply_larger_than_a_slot_is_still_sent() -> None:
    with _pair(socket.AF_INET, "127.0.0.1") as (server, clients):
        batch = mmsg.DatagramBatch(server, size=2)
        clients[0].sendto(b"q", ("127.0.0.1", server.getsockname()[1]))
        assert batch.receive() == 1
        batch.queue(0, b"y" * (mmsg.SEND_SLOT + 1))  # sent at once with sendto
        assert batch.flush() == 0
        assert len(clients[0].recv(70_000)) == mmsg.SEND_SLOT + 1


def test_replies_reach_their_senders_when_one_in_the_batch_gets_none() -> None:
    with _pair(socket.AF_INET, "127.0.0.1") as (server, clients):
        batch = mmsg.DatagramBatch(server, size=8)
        port = server.getsockname()[1]
        for round_ in range(2):  # round 1: the middle one dropped; round 2: none dropped
            for i, c in enumerate(clients):
                c.sendto(b"%d-%d" % (round_, i), ("127.0.0.1", port))
            got: list[bytes] = []
            while len(got) < 3:
                count = batch.receive()
                for i, data in enumerate(batch.datagrams(count)):
                    assert data is not None
                    got.append(data)
                    if not (round_ == 0 and data.endswith(b"-1")):
                        batch.queue(i, b"re:" + data)
                batch.flush()
            for i, c in enumerate(clients):
                if round_ == 0 and i == 1:
                    continue
                assert c.recv(100) == b"re:%d-%d" % (round_, i)
            clients[1].settimeout(0.2)
            if round_ == 0:
                with pytest.raises(TimeoutError):
                    clients[1].recv(100)
            clients[1].settimeout(2)
