"""The compiled loop's batch over a real UDP socket: it answers from answer tables alone
(the ID written in, the table's counters bumped), reports a table it cannot read as a
counted FALLBACK for the Python path, and raises the errors it meets instead of clearing
them."""

from __future__ import annotations

import random
import socket
import time
from array import array

import pytest

import dnsd._fastloop as fastloop
from dnsd import answer_table
from dnsd.answer_table import FALLBACK, Finished
from dnsd.steering.draws import Draw, Outcome

NO_TABLE = 5  # dnsd/_fastloop.c: no table for the query


def received(batch: fastloop.Batch, client: socket.socket, server: socket.socket,
             queries: list[bytes]) -> None:  # fmt: skip
    for query in queries:
        client.sendto(query, server.getsockname())
    time.sleep(0.05)  # all of them queued: one receive takes the batch
    assert batch.receive() == len(queries)


def test_tables_answered_unreadable_ones_counted(pair) -> None:
    server, client = pair
    batch = fastloop.Batch(server.fileno(), True, 8)
    static, garbled, unknown = (
        b"\x12\x34" + body for body in (b"static-query", b"garbled-query", b"no-table-at-all")
    )
    counters = array("q", [0] * 4)
    tables = {
        static[2:]: answer_table.static_table(b"\x81\x80static-reply", 2),
        garbled[2:]: b"dnsT\x09\x00 not a table of this version",
    }
    received(batch, client, server, [static, garbled, unknown])
    misses, answered, fallbacks = batch.answer_hits(tables, random.Random(1), counters, None, {})
    assert (answered, fallbacks) == (1, 1)
    assert sorted(code for _, (code, _, _) in misses) == [FALLBACK, NO_TABLE]
    assert list(counters) == [0, 0, 1, 0]  # the reply counter the table names
    assert batch.flush() == 0
    assert client.recv(512) == b"\x12\x34\x81\x80static-reply"


def test_errors_are_raised_not_cleared(pair) -> None:
    server, client = pair
    batch = fastloop.Batch(server.fileno(), True, 8)
    a, b = (Outcome((address,), None, "p", False, 0, ()) for address in ("192.0.2.1", "b"))
    tree = Draw(2.0, (1.0,), (a, b), "pool")
    table = answer_table.build(tree, {a: Finished(b"a" * 12, 0), b: Finished(b"b" * 12, 0)},
                               b"", 1).table  # fmt: skip
    query = b"\x00\x01draws-in-this-query"

    class Failing:
        def random(self) -> float:
            raise ZeroDivisionError("the random source failed")

    received(batch, client, server, [query])
    with pytest.raises(ZeroDivisionError):
        batch.answer_hits({query[2:]: table}, Failing(), array("q", [0]), None, {})
    with pytest.raises(TypeError):  # counters of another width: refused, not misread
        batch.answer_hits({query[2:]: table}, random.Random(1), array("i", [0]), None, {})

    def limiter(reply: bytes, who: object, wire: bytes) -> bytes | None:
        raise KeyError("the rate limiter failed")

    with pytest.raises(KeyError):
        batch.answer_hits({query[2:]: table}, random.Random(1), array("q", [0]), limiter,
                          {int.from_bytes(socket.inet_aton("127.0.0.1"), "little"): "c"})  # fmt: skip
