"""Health inside a running server: probes never delay answers; overrides and the state file."""

from __future__ import annotations

import time
from pathlib import Path

from dnsd.drill.backend import DemoBackend
from tests.conftest import NO_RRL, ServerThread
from tests.dnsclient import ask
from tests.health_harness import HEADER, write_config
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess
from tests.waiting import real_time_passes, until


def test_hung_backend_never_delays_dns_answers(tmp_path: Path) -> None:
    monitor = "type: http\ninterval: 100ms\ntimeout: 1s\nunhealthy_threshold: 2\n"
    # ~100 identical queries a second from one address: rate limiting off for this one.
    srv = ServerThread(write_config(tmp_path / "z", monitor, [("b0", 1)]), rrl=NO_RRL)
    srv.run_loop()
    backend = srv.call(DemoBackend("b0", control_port=None).start())
    try:
        srv.call(backend.set_mode("blackhole"))
        write_config(tmp_path / "z", monitor, [("b0", backend.port)])
        srv.call(srv.server.start())
        assert srv.reload()
        slowest = 0.0
        deadline = time.monotonic() + 3.0
        answered = 0
        while time.monotonic() < deadline:
            started = time.monotonic()
            reply = ask(srv.port, "www.h.test")
            slowest = max(slowest, time.monotonic() - started)
            assert reply.rr and str(reply.rr[0].rdata) == "127.0.0.1"
            answered += 1
        assert (
            backend.requests[""] + backend.requests["local"] >= 2
        )  # probes were hanging meanwhile
        assert not srv.server.store.view.backends[("p", "b0")].healthy  # and timed out
        # A probe blocking the loop would cost its whole 1 s timeout: bounds with room for a
        # busy machine (typically ~5 ms and ~1,000 answers).
        assert slowest < 0.3, f"slowest answer {slowest * 1000:.0f} ms"
        assert answered > 50
    finally:
        srv.call(backend.stop())
        srv.stop()


OVERRIDE_CONFIG = (
    HEADER.replace("  www: {lb: www}\n", "  www: {lb: www}\n")
    + """\
pools:
  first: {backends: [{name: f1, address: 192.0.2.10}]}
  second: {backends: [{name: s1, address: 192.0.2.20}]}
load_balancers:
  www: {default_pools: [first, second]}
"""
)


def address(port: int) -> str:
    return str(ask(port, "www.h.test").rr[0].rdata)


def test_persisted_overrides_apply_at_start_and_after_a_restart(tmp_path: Path) -> None:
    zones, state = tmp_path / "zones", tmp_path / "state"
    zones.mkdir()
    (zones / "h.yaml").write_text(OVERRIDE_CONFIG)
    state.mkdir()
    (state / "overrides.json").write_text('{"pools": {"first": "down"}}\n')
    for _ in range(2):  # start, stop, start again: the override holds both times
        with DnsdProcess(zones, "--state-dir", str(state)) as dnsd:
            assert address(dnsd.port) == "192.0.2.20"
            dnsd.wait_for_log("loaded 1 override(s)")
            assert dnsd.stop() == 0


def test_corrupt_state_file_does_not_stop_the_server(tmp_path: Path) -> None:
    zones, state = tmp_path / "zones", tmp_path / "state"
    zones.mkdir()
    (zones / "h.yaml").write_text(OVERRIDE_CONFIG)
    state.mkdir()
    (state / "overrides.json").write_text('{"pools": {"first": "sideways"}}')
    with DnsdProcess(zones, "--state-dir", str(state)) as dnsd:
        assert address(dnsd.port) == "192.0.2.10"
        dnsd.wait_for_log("is unreadable")
    assert list(state.glob("overrides.json.corrupt-*"))


def test_retries_never_stretch_the_outage_bound(tmp_path: Path) -> None:
    """docs/health.md: `timeout` bounds the whole probe, retries included: a black-holed backend is
    out within interval × unhealthy_threshold + timeout (3 s here; 6.3–6.9 s when each retry
    had its own timeout)."""
    monitor = "type: http\ninterval: 1s\ntimeout: 1s\nunhealthy_threshold: 2\nretries: 2\n"
    extra = "  sorry: {backends: [{name: s, address: 192.0.2.99}]}\n"
    loop = LoopThread()
    backend = loop.call(DemoBackend("b0", control_port=None).start())
    try:
        directory = write_config(tmp_path / "z", monitor, [("b0", backend.port)])
        text = (directory / "h.test.yaml").read_text()
        text = text.replace("load_balancers:\n", extra + "load_balancers:\n")
        text = text.replace("{default_pools: [p]}", "{default_pools: [p], fallback_pool: sorry}")
        (directory / "h.test.yaml").write_text(text)
        with DnsdProcess(directory, "--rrl-rate", "0") as proc:
            until(lambda: address(proc.port) == "127.0.0.1", 10.0, "the backend healthy")
            real_time_passes(0.5, "half a probe interval: the outage starts between probes")
            loop.call(backend.set_mode("blackhole"))
            took = until(lambda: address(proc.port) == "192.0.2.99", 10.0, "the failover")
    finally:
        loop.call(backend.stop())
        loop.close()
    assert took <= 1 * 2 + 1 + 0.6, f"detected after {took:.2f} s"
