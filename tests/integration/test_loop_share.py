"""Work that grows with the configuration never holds the event loop in one piece: a pool
that a thousand load balancers fail over from (and back to), or one backend of it flapping,
costs the admin API no more than a slice of them at a time."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.admin_client import http
from tests.churn import start_backends, write_config
from tests.conftest import ServerThread
from tests.loop_thread import LoopThread
from tests.waiting import until

TOKEN = "loop-share-token-0123456789"
NAMES = 4000  # a quarter start on pool a and fail over from it
HELD_CPU_S = 0.05  # a generous bound on one callback's CPU time (a slice: ~10 ms; was 110)


class CallbackClock:
    """The CPU time of each event-loop callback run on one thread (thread CPU time: what
    the event loop itself spent, whatever else the machine runs)."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.worst = 0.0
        self.worst_what = ""
        self._run = asyncio.events.Handle._run

    def __enter__(self) -> CallbackClock:
        clock, run = self, self._run

        def timed(handle: asyncio.events.Handle) -> None:
            if threading.get_ident() != clock.thread:
                return run(handle)
            started = time.thread_time()
            try:
                return run(handle)
            finally:
                took = time.thread_time() - started
                if took > clock.worst:
                    clock.worst, clock.worst_what = took, repr(handle)[:300]

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]


@pytest.fixture
def churn(tmp_path: Path) -> Iterator[tuple[ServerThread, dict]]:
    loop = LoopThread()
    backends = start_backends(loop)
    write_config(tmp_path, NAMES, {n: b.port for n, b in backends.items()})
    srv = ServerThread(tmp_path, admin_token=TOKEN).start()
    try:
        yield srv, {"loop": loop, "backends": backends}
    finally:
        srv.stop()
        for b in backends.values():
            loop.call(b.stop())
        loop.close()


def wait_for(what, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    until(what, timeout)


def count(events, before: int, kind: str) -> int:  # type: ignore[no-untyped-def]
    """Events of `kind` added since `before` were."""
    return sum(1 for e in events.recent(events.added - before) if e.kind == kind)


def test_a_pool_a_thousand_load_balancers_use_fails_over_a_slice_at_a_time(churn) -> None:
    srv, _ = churn
    store = srv.server.store
    wait_for(lambda: all(h.healthy for h in store.view.backends.values()))
    wait_for(lambda: srv.server.moves.armed)
    events = srv.server.events
    with CallbackClock() as clock:
        clock.thread = srv._thread.ident
        before = events.added
        status, body = http(srv.admin_port, "PUT", "/api/v1/overrides/pools/a",
                            {"state": "down"}, token=TOKEN)  # fmt: skip
        assert status == 200, body
        # l0, l4, l8, ... start on pool a: each fails over to b (one event each)
        wait_for(lambda: count(events, before, "failover") >= NAMES // 4)
        status, body = http(srv.admin_port, "DELETE", "/api/v1/overrides/pools/a", token=TOKEN)
        assert status == 200, body
        wait_for(lambda: count(events, before, "failback") >= NAMES // 4)
        wait_for(lambda: srv.server.failover.settled)  # no look left to add events
    assert count(events, before, "failover") == count(events, before, "failback") == NAMES // 4
    assert clock.worst < HELD_CPU_S, (clock.worst, clock.worst_what)


def test_a_reload_that_redefines_a_thousand_load_balancers_is_worked_out_off_the_loop(
    churn,
) -> None:
    """What a reload changed (the load balancers it redefined, what each reaches) is worked
    out in a thread: 4,000 load balancers cost one callback ~90 ms of CPU before."""
    srv, _ = churn
    store = srv.server.store
    wait_for(lambda: all(h.healthy for h in store.view.backends.values()))
    wait_for(lambda: srv.server.moves.armed)
    events = srv.server.events
    path = next(srv.config_dir.glob("*.yaml"))
    text = path.read_text()
    changed = text.replace("ttl: 30, default_pools: [a,", "ttl: 31, default_pools: [a,")
    assert changed.count("ttl: 31") == NAMES // 4
    with CallbackClock() as clock:
        clock.thread = srv._thread.ident
        before = events.added
        path.write_text(changed)
        request = urllib.request.Request(
            f"http://127.0.0.1:{srv.admin_port}/api/v1/reload", data=b"{}", method="POST",
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=60) as response:  # a big load, a busy host
            assert response.status == 200
        wait_for(lambda: count(events, before, "config") >= 1)
        wait_for(lambda: srv.server.failover.settled)  # the failover check after the reload
        status, body = http(srv.admin_port, "PUT", "/api/v1/overrides/pools/a",
                            {"state": "down"}, token=TOKEN)  # fmt: skip
        assert status == 200, body  # the new config's reach is in use: they fail over
        wait_for(lambda: count(events, before, "failover") >= NAMES // 4)
    assert count(events, before, "failover") == NAMES // 4
    assert clock.worst < HELD_CPU_S, (clock.worst, clock.worst_what)
