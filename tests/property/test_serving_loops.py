"""The compiled serving loop (dnsd/_fastloop.c) and the pure one send the same bytes:
two in-process servers on one config, one per loop, their random sources seeded
alike, asked the same random queries over real UDP sockets one at a time — static and
load-balanced names (draws, samples, trickle, nesting), ECS, two client addresses, health
overrides between rounds — and every reply compared byte for byte. Both walk the same
answer tables (dnsd.answer_table); the compiled one must have answered most repeats."""

from __future__ import annotations

import contextlib
import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dnslib import DNSRecord
from prometheus_client.parser import text_string_to_metric_families

from dnsd.net.udp_thread import compiled_available
from tests.conftest import DATA, NO_RRL, ServerThread
from tests.dnsclient import answers_query
from tests.property.test_fastpath_identity import random_query

SOURCES = ["127.0.0.1", "127.0.0.2"]
OVERRIDES = [  # (pool, backend, state) applied to both servers between rounds
    [],
    [("a", "a1", "down")],
    [("a", "a1", None), ("a", "a2", "down"), ("a", "a6", "down")],
    [("a", "a2", None), ("a", "a6", None), ("b", "b1", "down")],
]


@contextlib.contextmanager
def both_loops(config_dir: Path, tmp_path_factory: Any) -> Iterator[dict[str, ServerThread]]:
    """Two in-process servers on `config_dir`, one per serving loop ("compiled", "pure")."""
    assert compiled_available(), "dnsd._fastloop was not built: reinstall with a C compiler"
    started = {}
    try:
        for loop in ("compiled", "pure"):
            state = tmp_path_factory.mktemp(f"state-{loop}")
            started[loop] = ServerThread(
                config_dir, rrl=NO_RRL, state_dir=state, serving_loop=loop
            ).start()
        yield started
    finally:
        for srv in started.values():
            srv.stop()


def client_sockets() -> dict[str, socket.socket]:
    """A UDP socket bound to each of SOURCES (two client addresses)."""
    socks = {}
    for source in SOURCES:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((source, 0))
        sock.settimeout(2.0)
        socks[source] = sock
    return socks


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[dict[str, ServerThread]]:
    with both_loops(DATA / "fast", tmp_path_factory) as started:
        yield started


def ask(sock: socket.socket, port: int, wire: bytes) -> bytes | None:
    """The reply to `wire` from that server: a late reply to an earlier query is skipped."""
    sock.sendto(wire, ("127.0.0.1", port))
    deadline = time.monotonic() + 2.0
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            reply, sender = sock.recvfrom(65535)
        except TimeoutError:
            return None
        if sender[1] == port and answers_query(wire, reply):
            return reply
    return None


def scraped(srv: ServerThread) -> dict[str, dict[str, float]]:
    """The server's counters as its metrics render them: name → {loop label: value}."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(srv.server.metrics.render().decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[sample.labels.get("loop", "")] = sample.value
    return out


def override(srv: ServerThread, changes: list[tuple[str, str, str | None]]) -> None:
    async def apply() -> None:
        for pool, backend, state in changes:
            srv.server.store.set_backend_override(pool, backend, state)

    srv.call(apply())


def test_compiled_and_pure_loops_send_the_same_bytes(servers) -> None:
    loops = {name: srv.server.udp_threads[0].loop for name, srv in servers.items()}
    assert loops == {"compiled": "compiled", "pure": "pure"}
    rng = random.Random(20261201)
    socks = client_sockets()
    compared, recent = 0, []
    for round_, changes in enumerate(OVERRIDES):
        for srv in servers.values():
            override(srv, changes)
            srv.server.rng.seed(round_)  # the same random source from here on
        time.sleep(0.2)  # the new health view reaches both UDP threads
        for _ in range(750):
            if recent and rng.random() < 0.6:  # the same query again, another ID: a hit
                wire = rng.randbytes(2) + rng.choice(recent)[2:]
            else:
                wire = bytes(random_query(rng))
                recent = [*recent[-40:], wire]
            sock = socks[rng.choice(SOURCES)]
            compiled = ask(sock, servers["compiled"].port, wire)
            pure = ask(sock, servers["pure"].port, wire)
            assert compiled == pure, (DNSRecord.parse(wire), compiled, pure)
            compared += 1
    assert compared == 3000
    caches = {name: srv.server.caches for name, srv in servers.items()}
    hits = {name: sum(c.hits for c in cache.caches) for name, cache in caches.items()}
    assert hits["compiled"] == hits["pure"] > 1000, hits
    # Which code built the replies, as each server's own metrics say
    # (dnsd_serving_loop_answers_total{loop}): the compiled loop's C walked the answer
    # tables and answered itself (a C loop that answered nothing, leaving all to Python,
    # would send the same bytes and fail here), and never had to fall back.
    built = {name: scraped(srv) for name, srv in servers.items()}
    answers = {name: b["dnsd_serving_loop_answers_total"] for name, b in built.items()}
    assert sum(answers["compiled"].values()) == sum(answers["pure"].values()) == compared
    assert answers["compiled"].get("compiled", 0) > 600, answers  # 889 when written
    assert answers["pure"].get("compiled", 0) == 0, answers
    assert built["compiled"]["dnsd_compiled_loop_fallbacks_total"] == {"": 0}, built
    for sock in socks.values():
        sock.close()
