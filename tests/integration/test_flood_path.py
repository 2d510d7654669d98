"""A random-name flood over real sockets: the kernel's queue in front of a UDP loop holds
about QUEUE_BOUND_S of that loop's work (not seconds of a flood), and a flood of names that
do not exist, from many /24s, is answered by the compiled loop from the zone tables with
nothing remembered per name."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest
from dnslib import DNSRecord

from dnsd.serve.listeners import (
    LOOP_RATE_QPS,
    QUERY_TRUESIZE,
    QUEUE_BOUND_S,
    receive_buffer_bytes,
    size_receive_buffer,
)
from tests.conftest import DATA, NO_RRL, ServerThread

RMEM_MAX = Path("/proc/sys/net/core/rmem_max")


def kernel_value(asked: int) -> int:
    """What Linux makes of SO_RCVBUF `asked`: capped at rmem_max, then doubled."""
    return 2 * min(asked, int(RMEM_MAX.read_text()))


@pytest.mark.parametrize("serving_loop", ["compiled", "pure"])
def test_each_udp_loop_reads_a_queue_sized_to_its_rate(serving_loop: str) -> None:
    srv = ServerThread(DATA / "good", rrl=NO_RRL, serving_loop=serving_loop).start()
    try:
        [thread] = srv.server.udp_threads
        assert thread.loop == serving_loop
        got = thread.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        assert got == kernel_value(receive_buffer_bytes(serving_loop))
    finally:
        srv.stop()
    # QUEUE_BOUND_S of the loop's rate in small queries: the slower loop, the shorter queue
    queries = LOOP_RATE_QPS[serving_loop] * QUEUE_BOUND_S
    assert kernel_value(receive_buffer_bytes(serving_loop)) <= queries * QUERY_TRUESIZE
    assert receive_buffer_bytes("pure") < receive_buffer_bytes("compiled")


def test_a_full_queue_holds_about_the_bound_not_seconds_of_a_flood() -> None:
    """Queries sent to a socket nobody reads: the kernel keeps about what the compiled loop
    works off in QUEUE_BOUND_S (a thousand), where 4 MiB kept ten thousand."""
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as flood,
    ):
        size_receive_buffer(server, "compiled")
        server.bind(("127.0.0.1", 0))
        server.setblocking(False)
        wire = DNSRecord.question("r0123456789.child.example.test").pack()
        for _ in range(20_000):
            flood.sendto(wire, server.getsockname())
        held = 0
        while True:
            try:
                server.recv(512)
            except BlockingIOError:
                break
            held += 1
    bound = LOOP_RATE_QPS["compiled"] * QUEUE_BOUND_S  # about 1,000 small queries
    assert 200 <= held <= 2 * bound, held


def test_a_random_name_flood_from_many_prefixes_is_answered_in_c_and_not_cached() -> None:
    srv = ServerThread(DATA / "good", rrl=NO_RRL, serving_loop="compiled").start()
    rng = random.Random(46)
    socks = []
    try:
        for k in range(1, 9):  # eight source /24s, as bench/coldpath.py's flood
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind((f"127.0.{k}.1", 0))
            sock.settimeout(2.0)
            socks.append(sock)
        # Every query from a distinct name: nothing to cache, and each would be a new entry.
        for _ in range(2):  # once to let the zone tables settle, once measured
            before = srv.server.loops.counts()["answers"]
            caches = srv.server.caches.caches
            held = sum(len(c.tables("udp")) + len(c.memos("udp")) for c in caches)
            for _round in range(25):
                for sock in socks:  # 8 × 10 in flight at a time: well inside the queue
                    for _ in range(10):
                        name = f"r{rng.getrandbits(48):x}.child.example.test"
                        sock.sendto(DNSRecord.question(name).pack(), ("127.0.0.1", srv.port))
                for sock in socks:
                    for _ in range(10):
                        assert DNSRecord.parse(sock.recv(4096)).header.rcode == 3  # NXDOMAIN
            after = srv.server.loops.counts()["answers"]
        assert after.get("compiled", 0) - before.get("compiled", 0) == 2000
        assert after.get("pure", 0) == before.get("pure", 0)  # none through Python
        grown = sum(len(c.tables("udp")) + len(c.memos("udp")) for c in caches) - held
        assert grown == 0
    finally:
        for sock in socks:
            sock.close()
        srv.stop()
