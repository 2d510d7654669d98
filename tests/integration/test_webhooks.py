"""Alerts: a local HTTP receiver gets one signed `failover` webhook per failover
within 2 s and the signature verifies; a receiver that answers 500 three times, then 200,
gets the event once; a receiver that never answers does not slow DNS answers and its
queue stays bounded (the overflow is counted); a hostile backend's status line reaches a
Slack receiver escaped (no `<!channel>` ping, no disguised link)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket
import time
from pathlib import Path

from aiohttp import web

from tests.admin_client import http
from tests.dnsclient import ask
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess
from tests.waiting import stays, until

SECRET = "webhook-secret-0123456789"
TOKEN = "webhook-test-admin-token"


class Receiver:
    """An aiohttp server recording every POST; the first `fail` answers are 500."""

    def __init__(self, loop: LoopThread, fail: int = 0) -> None:
        self.loop, self.fail = loop, fail
        self.received: list[tuple[float, bytes, str]] = []  # (time, body, signature)
        self.attempts = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.attempts += 1
        if self.attempts <= self.fail:
            return web.Response(status=500)
        self.received.append((time.monotonic(), await request.read(),
                              request.headers.get("X-Dnsd-Signature", "")))  # fmt: skip
        return web.Response(text="ok")

    async def start(self) -> int:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return int(self.runner.addresses[0][1])


def server_file(tmp_path: Path, port: int, events: str) -> Path:
    path = tmp_path / "dnsd.yaml"
    path.write_text(
        f"webhooks:\n  - {{url: 'http://127.0.0.1:{port}/hook', events: [{events}], "
        f"secret: {SECRET}}}\n"
    )
    return path


def failover(dnsd: DnsdProcess, state: str = "down") -> None:
    method = "PUT" if state == "down" else "DELETE"
    body = {"state": "down"} if state == "down" else None
    assert (
        http(dnsd.admin_port, method, "/api/v1/overrides/pools/us-east", body, token=TOKEN)[0]
        == 200
    )


def test_one_signed_failover_webhook_and_retries_until_delivered(
    config_copy: Path, tmp_path: Path
) -> None:
    loop = LoopThread()
    try:
        receiver = Receiver(loop, fail=3)
        port = loop.call(receiver.start())
        config = server_file(tmp_path, port, "failover")
        with DnsdProcess(
            config_copy, "--config", str(config), env={"DNSD_ADMIN_TOKEN": TOKEN}
        ) as dnsd:
            failover(dnsd)  # us-east down: both load balancers (web, api) fail over
            # the first event's three 500s: retried after 0.5, 1, 2 s
            until(lambda: len(receiver.received) >= 2, 8.0, "both events delivered")
            stays(lambda: len(receiver.received) == 2, 0.5, "nothing more arrives")
        assert receiver.attempts == 3 + 2 and len(receiver.received) == 2  # each event once
        for _, body, sig in receiver.received:
            expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert hmac.compare_digest(sig, expected)
            event = json.loads(body)
            assert event["event"] == "failover" and event["lb"] in ("web", "api")
            assert all(change["from"].startswith("us-east") for change in event["changes"].values())
        # A second failover with a receiver that answers at once: within 2 s.
        receiver.fail, receiver.received, receiver.attempts = 0, [], 0
        with DnsdProcess(
            config_copy, "--config", str(config), env={"DNSD_ADMIN_TOKEN": TOKEN}
        ) as dnsd:
            started = time.monotonic()
            failover(dnsd)
            until(lambda: len(receiver.received) >= 2, 3.0, "both events delivered")
        lbs = sorted(json.loads(body)["lb"] for _, body, _ in receiver.received)
        assert lbs == ["api", "web"]  # one event per load balancer that failed over
        assert all(at - started < 2.0 for at, _, _ in receiver.received)
    finally:
        loop.close()


def test_a_receiver_that_never_answers_slows_nothing_and_stays_bounded(
    config_copy: Path, tmp_path: Path
) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1000)  # accepts connections, never answers
    config = server_file(tmp_path, silent.getsockname()[1], "override")
    try:
        with DnsdProcess(config_copy, "--config", str(config), "--rrl-rate", "0",
                         env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:  # fmt: skip

            def p99() -> float:
                times = []
                for _ in range(300):
                    started = time.perf_counter()
                    assert ask(dnsd.port, "mail.example.test").rr
                    times.append(time.perf_counter() - started)
                return sorted(times)[int(len(times) * 0.99)]

            before = p99()
            for _ in range(150):  # 300 override events for a queue of 256
                failover(dnsd, "down")
                failover(dnsd, "up")
            after = p99()
            _, metrics = http(dnsd.admin_port, "GET", "/metrics")
    finally:
        silent.close()
    dropped = next(float(line.split()[-1]) for line in metrics.splitlines()
                   if line.startswith('dnsd_webhook_total{result="dropped"}'))  # fmt: skip
    assert dropped >= 300 - 256 - 1  # the queue stayed bounded: the overflow was dropped
    assert after < max(0.02, before * 5), (before, after)


def test_pool_health_and_redis_events(config_copy: Path, tmp_path: Path) -> None:
    from tests.processes import Redis

    loop = LoopThread()
    redis = Redis().start()
    try:
        receiver = Receiver(loop)
        port = loop.call(receiver.start())
        config = server_file(tmp_path, port, "pool_health, redis")
        args = ("--config", str(config), "--redis", f"redis://127.0.0.1:{redis.port}/0",
                "--redis-insecure", "--node", "n1", "--pop-region", "WEU")  # fmt: skip
        with DnsdProcess(config_copy, *args, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
            dnsd.wait_for_log("connected: sharing health")
            failover(dnsd)  # the us-east pool is forced down
            redis.kill()  # the bus loses Redis
            until(lambda: len(receiver.received) >= 2, 10.0, "pool_health and redis events")
        events = [json.loads(body) for _, body, _ in receiver.received]
        assert {"event": "pool_health", "pool": "us-east", "healthy": False}.items() <= next(
            e for e in events if e["event"] == "pool_health"
        ).items()
        lost = next(e for e in events if e["event"] == "redis")
        assert lost["connected"] is False and str(redis.port) in lost["url"]
    finally:
        redis.kill()
        loop.close()


HOSTILE_LINE = b"HTTP/1.1 5O3 <!channel> <http://x|y> & co"  # a status aiohttp refuses,
# so the probe error quotes the whole line, reason and all


class HostileBackend:
    """A raw HTTP server: 200 OK until `hostile`, then a status line whose reason is Slack
    markup (a ping of everyone and a link shown as another)."""

    def __init__(self) -> None:
        self.hostile = False
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        line = HOSTILE_LINE if self.hostile else b"HTTP/1.1 200 OK"
        writer.write(line + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])


HOSTILE_ZONE = """\
zone: hostile.test
soa: {{mname: ns1.hostile.test., rname: h.hostile.test.}}
records:
  "@": {{NS: ns1.hostile.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
monitors:
  m: {{type: http, interval: 200ms, timeout: 1s, unhealthy_threshold: 2, healthy_threshold: 2,
      sources: [WEU]}}
pools:
  primary: {{monitor: m, backends: [{{name: p1, address: 127.0.0.1, port: {port}}}]}}
  standby: {{backends: [{{name: s1, address: 192.0.2.20}}]}}
load_balancers:
  web: {{ttl: 1, default_pools: [primary, standby]}}
"""


def test_a_hostile_backends_status_line_reaches_slack_escaped(tmp_path: Path) -> None:
    loop = LoopThread()
    try:
        backend = HostileBackend()
        backend_port = loop.call(backend.start())
        receiver = Receiver(loop)
        hook_port = loop.call(receiver.start())
        zones = tmp_path / "zones"
        zones.mkdir()
        (zones / "hostile.yaml").write_text(HOSTILE_ZONE.format(port=backend_port))
        config = tmp_path / "dnsd.yaml"
        config.write_text(
            f"webhooks:\n  - {{url: 'http://127.0.0.1:{hook_port}/hook', "
            f"events: [backend_health, failover], secret: {SECRET}, format: slack}}\n"
        )
        with DnsdProcess(zones, "--config", str(config), env={"DNSD_ADMIN_TOKEN": TOKEN}):
            # the first verdict (healthy) is in: it is no event
            until(lambda: backend.requests >= 4, 10.0, "four probes")
            backend.hostile = True
            until(lambda: len(receiver.received) >= 2, 8.0, "backend_health and failover")
        texts = [json.loads(body)["text"] for _, body, _ in receiver.received]
        health = next(t for t in texts if "backend_health" in t)
        assert "&lt;!channel&gt; &lt;http://x|y&gt; &amp; co" in health, health
        failover = next(t for t in texts if "failover" in t)
        assert "&lt;!channel&gt;" in failover and "-&gt; standby" in failover, failover
        for text in texts:  # Slack markup only of our own making: none
            assert "<" not in text and ">" not in text and "\n" not in text, text
            assert "&" not in text.replace("&amp;", "").replace("&lt;", "").replace("&gt;", "")
    finally:
        loop.close()
