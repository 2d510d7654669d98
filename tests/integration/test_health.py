"""Health probes against real HTTP/HTTPS/TCP servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import socket
import ssl
import subprocess
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from dnslib import RCODE, DNSRecord

from dnsd.drill.backend import DemoBackend
from dnsd.health.probes import ProbeTarget, probe
from dnsd.health.scheduler import ProbeScheduler
from dnsd.health.store import HealthStore
from dnsd.loading import load_snapshot
from dnsd.steering import SteeringInputs, steer
from dnsd.steering.client import ClientInfo
from tests.fake_clock import FakeClock
from tests.health_harness import HEADER, Recorder, wait_for, write_config
from tests.waiting import stays_async, until_async

FAST = """
type: http
path: /healthz
interval: 100ms
timeout: 300ms
healthy_threshold: 2
unhealthy_threshold: 3
"""


async def started(
    tmp_path: Path, monitor: str = FAST, count: int = 1, state_dir: Path | None = None
):
    backends = [await DemoBackend(f"b{i}", control_port=None).start() for i in range(count)]
    config = write_config(tmp_path / "zones", monitor, [(b.name, b.port) for b in backends])
    store = HealthStore(state_dir)
    store.set_snapshot(load_snapshot(config, 1))
    recorder = Recorder(store)
    scheduler = ProbeScheduler(store, rng=random.Random(1))
    await scheduler.start()
    return backends, store, recorder, scheduler


async def stop(backends, scheduler) -> None:
    await scheduler.stop()
    for b in backends:
        await b.stop()


def verdicts_after_switch(seen, now_ok: bool) -> list[bool]:
    """Verdicts after each result of the new kind, skipping results of probes that were
    already under way when the switch happened."""
    while seen and seen[0].ok != now_ok:
        seen = seen[1:]
    assert all(s.ok == now_ok for s in seen), [s.ok for s in seen]
    return [s.healthy for s in seen]


@pytest.mark.parametrize("mode", ["503", "refused", "blackhole", "slow"])
def test_backend_goes_down_after_exactly_the_threshold_and_comes_back(tmp_path, mode) -> None:
    async def main() -> None:
        (backend,), store, rec, scheduler = await started(tmp_path)
        try:
            await wait_for(lambda: len(rec.seen.get("b0", [])) >= 2)
            assert rec.seen["b0"][-1].healthy
            mark = len(rec.seen["b0"])
            await backend.set_mode(mode, slow_ms=600)  # slow: beyond the 300 ms timeout
            await wait_for(lambda: not store.view.backends[("p", "b0")].healthy)
            await wait_for(lambda: len(rec.after("b0", mark)) >= 5)
            failures = verdicts_after_switch(rec.after("b0", mark), now_ok=False)
            assert failures[:3] == [True, True, False]  # down on exactly the 3rd failure
            if mode in ("blackhole", "slow"):  # a hung backend costs one timeout per probe
                errors = [s.error for s in rec.after("b0", mark) if not s.ok]
                assert all("timeout after 0.3s" in (e or "") for e in errors)
                times = [s.at for s in rec.after("b0", mark) if not s.ok]
                assert all(b - a >= 0.25 for a, b in itertools.pairwise(times))
            mark = len(rec.seen["b0"])
            await backend.set_mode("ok")
            await wait_for(lambda: store.view.backends[("p", "b0")].healthy)
            await wait_for(lambda: len(rec.after("b0", mark)) >= 4)
            successes = verdicts_after_switch(rec.after("b0", mark), now_ok=True)
            assert successes[:2] == [False, True]  # up on exactly the 2nd success
        finally:
            await stop([backend], scheduler)

    asyncio.run(main())


def test_quorum_of_three_sources(tmp_path) -> None:
    monitor = FAST + "sources: [WNAM, ENAM, WEU]\n"

    async def main() -> None:
        (backend,), store, rec, scheduler = await started(tmp_path, monitor)
        try:
            await wait_for(
                lambda: {s.source for s in rec.seen.get("b0", [])} == {"WNAM", "ENAM", "WEU"}
            )
            await backend.set_mode("503", source="WEU")
            await wait_for(
                lambda: store.source_states(*pool_backend(store))["WEU"].state.state == "unhealthy"
            )
            mark = dict(backend.requests)  # more probes from every source since
            await wait_for(lambda: all(backend.requests[s] >= mark[s] + 2 for s in mark))
            assert store.view.backends[("p", "b0")].healthy  # 1 of 3 sources: still healthy
            assert backend.requests["WEU"] > 3 and backend.requests["WNAM"] > 3
            await backend.set_mode("503", source="ENAM")
            await wait_for(lambda: not store.view.backends[("p", "b0")].healthy)
            assert store.view.backends[("p", "b0")].probed == "unhealthy"
            states = {
                s: h.state.state for s, h in store.source_states(*pool_backend(store)).items()
            }
            assert states == {"WNAM": "healthy", "ENAM": "unhealthy", "WEU": "unhealthy"}
        finally:
            await stop([backend], scheduler)

    asyncio.run(main())


def pool_backend(store):
    pool = store.config.pools["p"]
    return pool, pool.backends[0]


# -- HTTP details ------------------------------------------------------------------------------
async def serve_app(app: web.Application, ssl_context=None) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    return runner, runner.addresses[0][1]


def monitor_from(tmp_path: Path, text: str, port: int):
    config = write_config(tmp_path / f"z{abs(hash(text))}", text, [("b", port)])
    return load_snapshot(config, 1).config.monitors["m"]


HTTP_CASES = [
    ("path: /ok", True),
    ("path: /ok\nexpected_body: all good", True),
    ("path: /ok\nexpected_body: nope", False),
    ("path: /redirect\nexpected_codes: '200,301'", True),
    ("path: /redirect\nexpected_codes: '200'", False),
    ("path: /redirect\nexpected_codes: '200'\nfollow_redirects: true", True),
    ("path: /teapot", False),
    ("path: /teapot\nexpected_codes: '418'", True),
    ("path: /teapot\nexpected_codes: '4xx'", True),
    ("path: /needs-host\nhost: app.example", True),
    ("path: /needs-host", False),
    ("path: /needs-header\nheaders: {X-Token: s3cret}", True),
    ("path: /ok\nmethod: HEAD", True),
]


@pytest.mark.parametrize(
    ("extra", "ok"), HTTP_CASES, ids=[c[0].replace("\n", " ") for c in HTTP_CASES]
)
def test_http_expectations(tmp_path, extra, ok) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/ok":
            return web.Response(text="all good")
        if path == "/redirect":
            raise web.HTTPMovedPermanently("/ok")
        if path == "/needs-host":
            return web.Response(status=200 if request.host.startswith("app.example") else 404)
        if path == "/needs-header":
            return web.Response(status=200 if request.headers.get("X-Token") == "s3cret" else 403)
        return web.Response(status=418)

    async def main() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner, port = await serve_app(app)
        try:
            monitor = monitor_from(tmp_path, f"type: http\ntimeout: 2s\n{extra}\n", port)
            async with aiohttp.ClientSession() as session:
                result = await probe(session, ProbeTarget("m", "127.0.0.1", port), monitor, "local")
            assert result.ok is ok, result.error
            assert (result.rtt_ms is not None) is ok
        finally:
            await runner.cleanup()

    asyncio.run(main())


def self_signed(tmp_path: Path) -> ssl.SSLContext:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


@pytest.mark.parametrize(("allow_insecure", "ok"), [(True, True), (False, False)])
def test_https_with_a_self_signed_certificate(tmp_path, allow_insecure, ok) -> None:
    async def main() -> None:
        app = web.Application()

        async def healthz(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app.router.add_get("/healthz", healthz)
        runner, port = await serve_app(app, self_signed(tmp_path))
        try:
            text = f"type: https\ntimeout: 2s\npath: /healthz\nallow_insecure: {str(allow_insecure).lower()}\n"
            monitor = monitor_from(tmp_path, text, port)
            async with aiohttp.ClientSession() as session:
                result = await probe(session, ProbeTarget("m", "127.0.0.1", port), monitor, "local")
            assert result.ok is ok
            if not ok:
                assert "certificate" in (result.error or "").lower()
        finally:
            await runner.cleanup()

    asyncio.run(main())


HOSTILE = {
    # what a hostile (or broken) backend answers a probe with, and how the error must begin
    "a status line of 7 KB over many lines": (
        "\x1b[2J\nline2\nline3\u2028".encode() * 600 + b"\r\n\r\n",
        "ClientResponseError: 400",
    ),
    "a Content-Length of 3,000 digits": (
        b"HTTP/1.1 200 OK\r\nContent-Length: \x1b" + b"9" * 3000 + b"\r\n\r\n",
        "ClientResponseError: 400",
    ),
    "a TLS record then junk": (b"\x16\x03\x01\x00\x05" + b"\n\x1b[31mjunk" * 500, "TLS: "),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_probe_error_is_one_short_line_whatever_the_backend_sends(tmp_path, case) -> None:
    """The error is shown in the status API and page, events, webhooks and logs: one line of
    at most 200 printable characters, however long or multi-line what the backend sent."""
    reply, begins = HOSTILE[case]

    async def main() -> str | None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1000)
            writer.write(reply)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        kind = "https" if begins.startswith("TLS") else "http"
        monitor = monitor_from(tmp_path, f"type: {kind}\ntimeout: 2s\npath: /healthz\n", port)
        try:
            async with aiohttp.ClientSession() as session:
                result = await probe(session, ProbeTarget("m", "127.0.0.1", port), monitor, "WEU")
        finally:
            server.close()
        assert not result.ok
        return result.error

    error = asyncio.run(main())
    assert error is not None and error.startswith(begins), error
    assert len(error) <= 200 and error.isprintable(), (len(error), error[:300])


def test_a_refused_certificate_says_why_in_a_few_words(tmp_path) -> None:
    async def main() -> str | None:
        runner, port = await serve_app(web.Application(), self_signed(tmp_path))
        monitor = monitor_from(tmp_path, "type: https\ntimeout: 2s\npath: /healthz\n", port)
        try:
            async with aiohttp.ClientSession() as session:
                result = await probe(session, ProbeTarget("m", "127.0.0.1", port), monitor, "WEU")
        finally:
            await runner.cleanup()
        return result.error

    assert asyncio.run(main()) == "TLS: the certificate was refused (self-signed certificate)"


def ca_signed_context(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, list[str | None]]:
    """A test CA (ca.pem in tmp_path) and a server certificate for `name` signed by it;
    the context records the SNI each client sent."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp_path)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=dnsd test CA",
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        f"/CN={name}",
    )
    (tmp_path / "ext.cnf").write_text(f"subjectAltName=DNS:{name}\n")
    run("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "leaf.pem", "-days", "1", "-extfile", "ext.cnf")  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "leaf.key")
    names: list[str | None] = []
    context.sni_callback = lambda _sock, server_name, _ctx: names.append(server_name)  # type: ignore[assignment]
    return context, names


HTTPS_CA_CASES = [
    # (monitor lines, ok): the backend is 127.0.0.1 with a certificate for backend.test
    ("host: backend.test\nca_file: ../ca.pem", True),
    ("host: backend.test", False),  # the system CAs do not know the test CA
    ("ca_file: ../ca.pem", False),  # an IP literal is checked against its address
    ("host: other.test\nca_file: ../ca.pem", False),  # the name must match
]


@pytest.mark.parametrize(("lines", "ok"), HTTPS_CA_CASES)
def test_https_sni_and_private_ca(tmp_path, lines, ok) -> None:
    async def main() -> None:
        app = web.Application()
        hosts: list[str] = []

        async def healthz(request: web.Request) -> web.Response:
            hosts.append(request.host)
            return web.Response(text="ok")

        app.router.add_get("/healthz", healthz)
        context, sni = ca_signed_context(tmp_path, "backend.test")
        runner, port = await serve_app(app, context)
        try:
            monitor = monitor_from(
                tmp_path, f"type: https\ntimeout: 2s\npath: /healthz\n{lines}\n", port
            )
            async with aiohttp.ClientSession() as session:
                result = await probe(session, ProbeTarget("m", "127.0.0.1", port), monitor, "local")
            assert result.ok is ok, result.error
            if ok:
                assert sni == ["backend.test"] and hosts == ["backend.test"]
            else:
                assert "certificate" in (result.error or "").lower()
        finally:
            await runner.cleanup()

    asyncio.run(main())


def test_ca_file_that_cannot_be_loaded_is_a_config_error(tmp_path) -> None:
    from dnsd.config.loader import load_config
    from dnsd.errors import ConfigError

    (tmp_path / "bad.pem").write_text("not a certificate\n")
    for ca in ("missing.pem", "bad.pem"):
        config = write_config(
            tmp_path / f"z-{ca}", f"type: https\nca_file: ../{ca}\n", [("b", 443)]
        )
        with pytest.raises(ConfigError) as caught:
            load_config(config)
        assert "monitors.m.ca_file: cannot load CA file" in str(caught.value)


def test_tcp_and_dns_monitors(tmp_path) -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        monitor = monitor_from(tmp_path, "type: tcp\ntimeout: 1s\n", port)
        async with aiohttp.ClientSession() as session:
            assert (await probe(session, ProbeTarget("m", "127.0.0.1", port), monitor, "x")).ok
            server.close()
            await server.wait_closed()
            refused = await probe(session, ProbeTarget("m", "127.0.0.1", port), monitor, "x")
            assert (not refused.ok and "Connect" in (refused.error or "")) or "refused" in (
                refused.error or ""
            ).lower()

    asyncio.run(main())


DNS_CASES = [
    # (monitor lines, ok, error text): dnsd itself is the DNS backend
    ("query_name: example.test", True, None),
    ("", False, "REFUSED"),  # '.' SOA: not dnsd's zone
    ("expected_rcodes: [NOERROR, REFUSED]", True, None),
    ("query_name: nothere.child.example.test\nquery_type: A", False, "NXDOMAIN"),
    ("query_name: nothere.child.example.test\nexpected_rcodes: [NXDOMAIN]", True, None),
]


@pytest.mark.parametrize(("lines", "ok", "error"), DNS_CASES)
def test_dns_monitor_against_dnsd_itself(tmp_path, server, lines, ok, error) -> None:
    async def main() -> None:
        monitor = monitor_from(tmp_path, f"type: dns\ntimeout: 1s\n{lines}\n", server.port)
        async with aiohttp.ClientSession() as session:
            result = await probe(session, ProbeTarget("m", "127.0.0.1", server.port), monitor, "x")
        assert result.ok is ok, result
        if error:
            assert error in (result.error or "")

    asyncio.run(main())


class _FixedRcode(asyncio.DatagramProtocol):
    """A broken DNS backend: answers every question with one rcode (SERVFAIL)."""

    def __init__(self, rcode: int) -> None:
        self.rcode = rcode

    def connection_made(self, transport) -> None:  # type: ignore[no-untyped-def]
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:  # type: ignore[no-untyped-def]
        reply = DNSRecord.parse(data).reply()
        reply.header.rcode = self.rcode
        self.transport.sendto(reply.pack(), addr)


@pytest.mark.parametrize(("rcode", "lines", "ok"), [
    (RCODE.SERVFAIL, "", False),
    (RCODE.REFUSED, "", False),
    (RCODE.NOERROR, "", True),
    (RCODE.SERVFAIL, "expected_rcodes: [NOERROR, SERVFAIL]", True),
])  # fmt: skip
def test_dns_monitor_counts_only_expected_rcodes(tmp_path, rcode, lines, ok) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _FixedRcode(rcode), local_addr=("127.0.0.1", 0)
        )
        port = transport.get_extra_info("sockname")[1]
        monitor = monitor_from(tmp_path, f"type: dns\ntimeout: 1s\n{lines}\n", port)
        try:
            async with aiohttp.ClientSession() as session:
                result = await probe(session, ProbeTarget("m", "127.0.0.1", port), monitor, "x")
        finally:
            transport.close()
        assert result.ok is ok, result
        if not ok:
            assert RCODE.get(rcode) in (result.error or "")

    asyncio.run(main())


def test_retries_happen_inside_one_probe(tmp_path) -> None:
    async def main() -> None:
        backend = await DemoBackend("b", control_port=None).start()
        try:
            await backend.set_mode("503")
            monitor = monitor_from(tmp_path, "type: http\ntimeout: 1s\nretries: 2\n", backend.port)
            async with aiohttp.ClientSession() as session:
                result = await probe(
                    session, ProbeTarget("m", "127.0.0.1", backend.port), monitor, "x"
                )
            assert not result.ok and backend.requests["x"] == 3
        finally:
            await backend.stop()

    asyncio.run(main())


# -- RTT profiles ------------------------------------------------------------------------------
def test_rtt_profile_is_built_and_goes_stale(tmp_path) -> None:
    monitor = FAST + "sources: [WEU]\n"

    async def main() -> None:
        (backend,), store, rec, scheduler = await started(tmp_path, monitor)
        try:
            await backend.set_mode("slow", slow_ms=40)
            await wait_for(lambda: len(rec.seen.get("b0", [])) >= 6)
            store.publish()
            sample = store.view.backends[("p", "b0")].rtt["WEU"]
            assert sample.samples >= 6 and 20 <= sample.ewma_ms < 300
            # New RTTs alone publish a new view but not new states: answer caches keep
            # the plans that do not steer by RTT (dnsd.fastpath).
            before = store.view
            await wait_for(lambda: len(rec.seen["b0"]) >= 8)
            store.publish()
            assert store.view.generation > before.generation
            assert store.view.states_generation == before.states_generation
            store.set_backend_override("p", "b0", "drain")
            assert store.view.states_generation == before.states_generation + 1
            store.set_backend_override("p", "b0", None)
        finally:
            await stop([backend], scheduler)
        snap = load_snapshot(tmp_path / "zones", 1)
        lb = snap.config.load_balancers["www"]
        from dataclasses import replace

        dynamic = replace(lb, steering="dynamic", rtt_max_age_s=5.0, min_samples=3)
        from dnsd.geo.locate import Location

        client = ClientInfo(
            __import__("ipaddress").ip_address("81.2.69.1"), location=Location(region="WEU")
        )
        fresh = steer(
            SteeringInputs(snap, store.view, client, random.Random(1), time.time()), dynamic, 1
        )
        assert fresh.candidates[0].rtt_ms is not None
        stale = steer(
            SteeringInputs(snap, store.view, client, random.Random(1), time.time() + 6), dynamic, 1
        )
        assert stale.candidates[0].rtt_ms is None and "no current RTT data" in stale.reasons[0]

    asyncio.run(main())


# -- reload reconciliation ---------------------------------------------------------------------
def test_reload_keeps_unchanged_targets_and_starts_and_stops_others(tmp_path) -> None:
    async def main() -> None:
        backends, store, rec, scheduler = await started(tmp_path, count=2)
        try:
            await wait_for(lambda: all(len(rec.seen.get(b.name, [])) >= 2 for b in backends))
            await backends[0].set_mode("503")
            await wait_for(lambda: not store.view.backends[("p", "b0")].healthy)
            extra = await DemoBackend("b9", control_port=None).start()
            backends.append(extra)
            config = write_config(
                tmp_path / "zones", FAST, [("b0", backends[0].port), ("b9", extra.port)]
            )
            store.set_snapshot(load_snapshot(config, 2))
            scheduler.reconcile()
            assert not store.view.backends[("p", "b0")].healthy  # kept its state
            await wait_for(lambda: len(rec.seen.get("b9", [])) >= 1)
            before = backends[1].requests.copy()
            probed = len(rec.seen["b9"])  # the kept and the new one go on being probed
            await wait_for(lambda: len(rec.seen["b9"]) >= probed + 3)
            assert backends[1].requests == before  # the removed backend is no longer probed
            assert ("p", "b1") not in store.view.backends
        finally:
            await stop(backends, scheduler)

    asyncio.run(main())


# -- overrides: beside the probed state, persisted -----------------------------------------------
def test_overrides_sit_beside_probes_and_persist(tmp_path) -> None:
    state = tmp_path / "state"

    async def main() -> None:
        (backend,), store, rec, scheduler = await started(tmp_path, state_dir=state)
        try:
            await wait_for(lambda: len(rec.seen.get("b0", [])) >= 1)
            store.set_backend_override("p", "b0", "down")
            view = store.view.backends[("p", "b0")]
            assert (view.healthy, view.probed, view.override) == (False, "healthy", "down")
            store.set_pool_override("p", "up")
            store.set_trickle_override("www", 0.25)
            with pytest.raises(KeyError):
                store.set_backend_override("p", "nosuch", "down")
            with pytest.raises(ValueError):
                store.set_trickle_override("www", 1.5)
        finally:
            await stop([backend], scheduler)
        data = json.loads((state / "overrides.json").read_text())
        assert data.pop("updated_at") > 0
        assert set(data.pop("versions")) == {"backends/p/b0", "pools/p", "load_balancers/www"}
        assert data == {
            "backends": {"p/b0": "down"},
            "pools": {"p": "up"},
            "load_balancers": {"www": {"trickle_ratio": 0.25}},
        }
        again = HealthStore(state)
        assert again.backend_overrides == {("p", "b0"): "down"}
        assert again.pool_overrides == {"p": "up"} and again.trickle_overrides == {"www": 0.25}

    asyncio.run(main())


def test_corrupt_state_file_is_set_aside(tmp_path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "overrides.json").write_text("{not json")
    store = HealthStore(state)
    assert store.backend_overrides == {}
    assert not (state / "overrides.json").exists()
    assert len(list(state.glob("overrides.json.corrupt-*"))) == 1


def test_a_deeply_nested_state_file_is_set_aside_and_leftovers_removed(tmp_path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "overrides.json").write_text("[" * 100_000 + "]" * 100_000)
    # A crash inside write_file leaves its temporary file, named as write_file names it.
    (state / ".overrides.json.k3x9_q.tmp").write_text("{half")
    store = HealthStore(state)  # used to crash the start with RecursionError
    assert store.backend_overrides == {}
    assert len(list(state.glob("overrides.json.corrupt-*"))) == 1
    assert not list(state.glob(".overrides.json*"))


def test_a_pool_of_hung_backends_cannot_delay_another_pools_detection(tmp_path) -> None:
    """docs/health.md (probe slots): 300 backends that accept and never answer hold probe slots
    for a whole timeout each; another pool's failure is still seen within its outage bound
    (interval × unhealthy_threshold + timeout = 0.7 s here). With one first-come queue for all
    slots (100 here, so that 300 hung backends overload it 3×) the other pool's probes waited
    behind the hung ones: 2.5–4 s."""
    hung = []
    for _ in range(300):  # listening, never accepting: connects succeed, requests hang
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        hung.append(sock)
    big = "\n".join(
        f"      - {{name: h{i}, address: 127.0.0.1, port: {s.getsockname()[1]}}}"
        for i, s in enumerate(hung)
    )

    async def main() -> None:
        backend = await DemoBackend("b0", control_port=None).start()
        text = HEADER.replace("  www: {lb: www}\n", "  www: {lb: www}\n  big: {lb: big}\n")
        text += (
            "monitors:\n"
            "  m: {type: http, path: /healthz, interval: 200ms, timeout: 300ms,"
            " unhealthy_threshold: 2}\n"
            "  hang: {type: http, path: /, interval: 200ms, timeout: 1s}\n"
            f"pools:\n  p:\n    monitor: m\n    backends:\n"
            f"      - {{name: b0, address: 127.0.0.1, port: {backend.port}}}\n"
            f"  big:\n    monitor: hang\n    backends:\n{big}\n"
            "load_balancers:\n  www: {default_pools: [p]}\n  big: {default_pools: [big]}\n"
        )
        (tmp_path / "z").mkdir()
        (tmp_path / "z" / "h.test.yaml").write_text(text)
        store = HealthStore(None)
        store.set_snapshot(load_snapshot(tmp_path / "z", 1))
        scheduler = ProbeScheduler(store, max_concurrent=100, rng=random.Random(1))
        errs = []
        scheduler.on_probe = lambda t, s, r: (
            errs.append((time.monotonic(), r.error)) if t.port == backend.port else None
        )
        await scheduler.start()
        try:
            await wait_for(lambda: store.view.backends[("p", "b0")].probed == "healthy")
            # the hung probes fill the slots, wave after wave, timing out meanwhile
            await wait_for(lambda: scheduler.probes_total >= 60)
            assert store.view.backends[("p", "b0")].healthy, errs
            await backend.set_mode("503")
            began = time.monotonic()
            await wait_for(lambda: not store.view.backends[("p", "b0")].healthy)
            took = time.monotonic() - began
            assert took < 0.2 * 2 + 0.3 + 0.8, f"detected after {took:.2f} s"
        finally:
            await scheduler.stop()
            await backend.stop()
            for sock in hung:
                sock.close()

    asyncio.run(main())


def test_the_probe_cadence_is_the_schedulers_clock(tmp_path) -> None:
    """A 30 s interval on a clock the test advances: each interval costs no real time, and
    between advances no probe runs (the cadence is the clock's, not the wall's)."""
    slow = FAST.replace("interval: 100ms", "interval: 30s")

    async def main() -> None:
        clock = FakeClock()
        backend = await DemoBackend("b0", control_port=None).start()
        config = write_config(tmp_path / "zones", slow, [(backend.name, backend.port)])
        store = HealthStore(None)
        store.set_snapshot(load_snapshot(config, 1))
        rec = Recorder(store)
        scheduler = ProbeScheduler(store, rng=random.Random(1), clock=clock)
        await scheduler.start()
        try:

            def probes() -> int:
                return len(rec.seen.get("b0", []))

            await clock.advance(0.25)  # the first probe's jitter
            await until_async(lambda: probes() == 1, what="the first probe")
            for n in range(2, 5):
                await until_async(lambda: clock.sleepers == 1, what="the wait for the next")
                # Real time passes, the clock does not: no probe.
                await stays_async(lambda n=n: probes() == n - 1, 0.2, "no probe")
                await clock.advance(30)
                await until_async(lambda n=n: probes() == n, what=f"probe {n}")
            assert store.view.backends[("p", "b0")].healthy  # 2 successes, on the fake clock
            await backend.set_mode("503")
            for n in range(5, 8):
                await until_async(lambda: clock.sleepers == 1, what="the wait for the next")
                await clock.advance(30)
                await until_async(lambda n=n: probes() == n, what=f"probe {n}")
            assert not store.view.backends[("p", "b0")].healthy  # down on the 3rd failure
        finally:
            await stop([backend], scheduler)

    asyncio.run(main())
