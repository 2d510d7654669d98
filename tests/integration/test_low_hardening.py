"""Low-severity hardening, each against a real `dnsd serve`:
NaN is refused, secrets never reach the log or `dnsd config show`, a zero-length COOKIE
gets FORMERR, webhooks do not follow redirects, the apex NS set cannot be deleted through
the config API, and 1,000 changes fit one change set."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aiohttp import web
from dnslib import EDNS0, DNSRecord, EDNSOption

from tests.admin_client import http
from tests.attackers import request_from
from tests.dnsclient import udp_raw
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess, Redis
from tests.waiting import until

TOKEN = "low-token"


def test_nan_is_a_clear_error_in_yaml_and_in_json(config_copy: Path) -> None:
    bad = config_copy / "nan.yaml"
    bad.write_text("load_balancers:\n  nanlb: {default_pools: [us-east], trickle_ratio: .nan}\n")
    done = subprocess.run([sys.executable, "-m", "dnsd", "check", str(config_copy)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode != 0 and "trickle_ratio: expected a finite number" in done.stderr
    bad.unlink()
    with DnsdProcess(config_copy, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        route = "/api/v1/overrides/load_balancers/www"
        for raw in (b'{"trickle_ratio": NaN}', b'{"trickle_ratio": Infinity}'):
            status, body = http(dnsd.admin_port, "PUT", route, raw=raw, token=TOKEN)
            assert status == 400 and "not a number JSON allows" in body["error"]


def test_secrets_never_reach_the_log_or_config_show(config_copy: Path, tmp_path: Path) -> None:
    password, hook = "redis-pass-0123456789", "https://hooks.example/services/T0/B0/hook-secret-42"
    redis = Redis().start()
    try:
        redis.cli("config", "set", "requirepass", password)
        url = f"redis://:{password}@127.0.0.1:{redis.port}/0"
        server_file = tmp_path / "dnsd.yaml"
        server_file.write_text(
            f'webhooks:\n  - {{url: "{hook}", events: [failover], secret: hook-signing-0123456789}}\n'
        )
        shown = subprocess.run(
            [sys.executable, "-m", "dnsd", "config", "show", str(config_copy), "--config",
             str(server_file), "--redis", url],
            capture_output=True, text=True,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert "redis://:***@" in shown.stdout and "https://hooks.example/…" in shown.stdout
        args = ("--config", str(server_file), "--redis", url, "--node", "a", "--pop-region",
                "WEU", "--redis-insecure")  # fmt: skip
        with DnsdProcess(config_copy, *args) as dnsd:
            dnsd.wait_for_log("sharing health as node")
            logged = len(dnsd.lines)
            redis.cli("-a", password, "client", "kill", "type", "pubsub")  # a reconnect: logged
            until(lambda: len(dnsd.lines) > logged, 5.0, "the reconnect logged")
        log = dnsd.output
        assert "redis://:***@" in log
    finally:
        redis.kill()
    for secret in (password, "hook-secret-42"):
        assert secret not in log and secret not in shown.stdout + shown.stderr


def test_a_zero_length_cookie_gets_formerr(config_copy: Path) -> None:
    with DnsdProcess(config_copy) as dnsd:
        for size, rcode in ((0, 1), (5, 1), (8, 0)):
            query = DNSRecord.question("mail.example.test")
            query.add_ar(EDNS0(udp_len=1232, opts=[EDNSOption(10, b"\x01" * size)]))
            for _ in range(2):  # and the second time (no cache answers it either)
                raw = udp_raw(dnsd.port, query.pack())
                assert raw is not None and DNSRecord.parse(raw).header.rcode == rcode, size


def test_webhooks_do_not_follow_redirects(config_copy: Path, tmp_path: Path) -> None:
    hits: list[str] = []

    async def redirect(request: web.Request) -> web.Response:
        hits.append(request.path)
        if request.path == "/hook":
            raise web.HTTPFound("/elsewhere")
        return web.Response(text="ok")

    loop = LoopThread()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", redirect)
    runner = web.AppRunner(app)

    async def start() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return int(runner.addresses[0][1])

    port = loop.call(start())
    try:
        server_file = tmp_path / "dnsd.yaml"
        server_file.write_text(
            f'webhooks:\n  - {{url: "http://127.0.0.1:{port}/hook", events: [override], secret: hook-signing-0123456789}}\n'
        )
        with DnsdProcess(config_copy, "--config", str(server_file),
                         env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:  # fmt: skip
            route = "/api/v1/overrides/pools/us-east"
            assert http(dnsd.admin_port, "PUT", route, {"state": "down"}, TOKEN)[0] == 200
            dnsd.wait_for_log("redirect: not followed")
        assert hits and set(hits) == {"/hook"}  # never /elsewhere
    finally:
        loop.call(runner.cleanup())
        loop.close()


def test_the_apex_ns_set_cannot_be_deleted_and_1000_changes_fit(config_copy: Path) -> None:
    with DnsdProcess(config_copy, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        port = dnsd.admin_port
        apex = "/api/v1/config/zones/example.test/records/@"
        status, before = http(port, "GET", apex, token=TOKEN)
        assert status == 200 and "NS" in before
        for method, body in (("DELETE", None), ("PUT", {"TXT": ["no ns here"]})):
            status, answer = http(port, method, apex, body, token=TOKEN)
            assert status == 400 and "NS records" in answer["error"], answer
        assert http(port, "GET", apex, token=TOKEN)[1] == before  # nothing changed
        changes = [
            {"method": "PUT", "route": f"zones/example.test/records/bulk{i:04d}",
             "body": {"A": [f"192.0.2.{i % 250 + 1}"], "ttl": 300}}
            for i in range(1000)
        ]  # fmt: skip
        status, answer = request_from("127.0.0.1", port, "POST", "/api/v1/config/changes",
                                      {"changes": changes}, TOKEN, timeout=120)  # fmt: skip
        assert status == 200, answer
        raw = udp_raw(dnsd.port, DNSRecord.question("bulk0999.example.test").pack())
        assert raw is not None and [str(r.rdata) for r in DNSRecord.parse(raw).rr] == [
            "192.0.2.250"
        ]
        status, answer = http(port, "PUT", "/api/v1/config/zones/example.test/records/big",
                              {"TXT": ["x" * 200] * 400}, TOKEN)  # fmt: skip
        assert status == 413  # every other route keeps its 64 KiB cap
