"""The admin HTTP API: every route, auth, validation, metrics, persistence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dnsd.admin.app import build_app
from dnsd.admin.openapi import openapi_document
from tests.admin_client import http
from tests.conftest import ServerThread
from tests.dnsclient import ask
from tests.processes import DnsdProcess

TOKEN = "s3cret-token"


@pytest.fixture
def admin(config_copy: Path, tmp_path: Path):
    srv = ServerThread(config_copy, admin_token=TOKEN, state_dir=tmp_path / "state").start()
    yield srv
    srv.stop()


def api_address(port: int) -> str:
    """The answer for www (geo; a loopback client has no region: default pools, no trickle).
    Not `api`: it trickles 10% of answers to its backup pool by design."""
    return str(ask(port, "www.example.test").rr[0].rdata)


# -- reads ---------------------------------------------------------------------------------------
def test_health_and_readiness(admin) -> None:
    assert http(admin.admin_port, "GET", "/healthz") == (200, {"status": "ok"})
    status, body = http(admin.admin_port, "GET", "/readyz")
    assert status == 200 and body["ready"] is True and body["generation"] == 1


def test_status_lists_pools_backends_and_load_balancers(admin) -> None:
    status, body = http(admin.admin_port, "GET", "/api/v1/status")
    assert status == 200
    assert [p["name"] for p in body["pools"]] == ["us-east", "eu-west", "maintenance"]
    backend = body["pools"][0]["backends"][0]
    assert (
        backend["name"] == "use1-b-1"
        and backend["healthy"] is True
        and backend["probed"] == "unmonitored"
    )
    web = next(lb for lb in body["load_balancers"] if lb["name"] == "web")
    assert web["active"]["WEU"] == "eu-west" and web["active"]["ENAM"] == "us-east"
    assert body["config"]["generation"] == 1


def test_explain_with_live_health(admin) -> None:
    status, body = http(
        admin.admin_port, "GET", "/api/v1/explain?name=www.example.test&client=81.2.69.142"
    )
    assert status == 200 and body["region"] == "WEU" and body["pool"] == "eu-west"
    # the outage budget (docs/steering.md): these pools have no monitor, so no number
    assert body["outage_budget"]["lb"] == "web" and body["outage_budget"]["seconds"] is None
    assert body["outage_budget"]["formula"] == "no probes: an outage is never detected"
    http(admin.admin_port, "PUT", "/api/v1/overrides/pools/eu-west", {"state": "down"}, TOKEN)
    status, body = http(
        admin.admin_port,
        "GET",
        "/api/v1/explain?name=www.example.test&client=81.2.69.142&ecs=81.2.69.0/24",
    )
    # scope: the geo DB network is a /22, but us-east has zonal affinity and client_zones
    # exist, so the answer depends on the whole /24 the client sent
    assert status == 200 and body["pool"] == "us-east" and body["ecs_scope"] == 24
    assert http(admin.admin_port, "GET", "/api/v1/explain")[0] == 400
    assert (
        http(admin.admin_port, "GET", "/api/v1/explain?name=www.example.test&client=nope")[0] == 400
    )


def test_metrics_parse_and_move_with_queries(admin) -> None:
    def samples() -> dict[tuple[str, tuple], float]:
        status, text = http(admin.admin_port, "GET", "/metrics")
        assert status == 200
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    before = samples()
    for _ in range(5):
        ask(admin.port, "www.example.test")
    ask(admin.port, "nope.mail.example.test")
    after = samples()
    key = ("dnsd_queries_total", (("qtype", "A"), ("rcode", "NOERROR"), ("transport", "udp")))
    assert after[key] - before.get(key, 0) == 5
    nx = ("dnsd_queries_total", (("qtype", "A"), ("rcode", "NXDOMAIN"), ("transport", "udp")))
    assert after[nx] - before.get(nx, 0) == 1
    lb = ("dnsd_lb_answers_total", (("lb", "web"), ("pool", "us-east"), ("region", "-")))
    assert after[lb] - before.get(lb, 0) == 5
    assert after[("dnsd_answer_latency_seconds_count", ())] >= 6
    assert after[("dnsd_config_generation", ())] == 1
    # Every answer cache counts, the UDP threads' own included: 6 lookups, 1 of them new.
    hits, misses = (("dnsd_answer_cache_total", (("result", r),)) for r in ("hit", "miss"))
    looked_up = after[hits] + after[misses] - before.get(hits, 0) - before.get(misses, 0)
    assert looked_up == 6 and after[hits] - before.get(hits, 0) >= 4
    # The components' own collectors: TCP listener, rate limiting, reloads.
    assert after[("dnsd_tcp_connections", ())] == 0
    assert after[("dnsd_rrl_buckets", ())] >= 1  # rate limiting is on, as `dnsd serve` runs
    assert after[("dnsd_reloads_total", (("result", "failed"),))] == 0
    # The state is the value, not a label: a series that flips keeps its identity.
    backend = (("backend", "use1-b-1"), ("pool", "us-east"))
    assert after[("dnsd_backend_up", backend)] == 1
    assert after[("dnsd_backend_probed_up", backend)] == 1


def test_openapi_lists_every_route(admin) -> None:
    status, doc = http(admin.admin_port, "GET", "/api/v1/openapi.json")
    assert status == 200 and doc == json.loads(json.dumps(openapi_document()))
    served = set()
    for route in build_app(admin.server, ()).router.routes():
        if route.method != "HEAD":
            served.add((route.method.lower(), route.resource.canonical))
    documented = {(m, path) for path, ops in doc["paths"].items() for m in ops}
    assert served == documented


def test_unknown_route_and_method_are_json_errors(admin) -> None:
    status, body = http(admin.admin_port, "GET", "/api/v1/nothing")
    assert status == 404 and "error" in body
    status, body = http(admin.admin_port, "POST", "/api/v1/status", token=TOKEN)
    assert status == 405 and "error" in body


# -- writes: auth and validation --------------------------------------------------------------
WRITES = [
    ("POST", "/api/v1/reload", None),
    ("PUT", "/api/v1/overrides/backends/us-east/use1-b-1", {"state": "down"}),
    ("DELETE", "/api/v1/overrides/backends/us-east/use1-b-1", None),
    ("PUT", "/api/v1/overrides/pools/us-east", {"state": "down"}),
    ("DELETE", "/api/v1/overrides/pools/us-east", None),
    ("PUT", "/api/v1/overrides/load_balancers/api", {"trickle_ratio": 0.5}),
    ("DELETE", "/api/v1/overrides/load_balancers/api", None),
]


@pytest.mark.parametrize(("method", "path", "body"), WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
def test_writes_need_the_token(admin, method, path, body) -> None:
    assert http(admin.admin_port, method, path, body)[0] == 401
    assert http(admin.admin_port, method, path, body, token="wrong")[0] == 403
    assert admin.server.store.backend_overrides == {} and admin.server.store.pool_overrides == {}
    status, _ = http(admin.admin_port, method, path, body, token=TOKEN)
    assert status == 200


def test_writes_are_refused_without_a_configured_token(config_copy) -> None:
    srv = ServerThread(config_copy).start()
    try:
        status, body = http(
            srv.admin_port, "PUT", "/api/v1/overrides/pools/us-east", {"state": "down"}, token="x"
        )
        assert status == 403 and "no admin token" in body["error"]
    finally:
        srv.stop()


BAD_WRITES = [
    ("PUT", "/api/v1/overrides/pools/us-east", None, b"{not json", 400),
    ("PUT", "/api/v1/overrides/pools/us-east", ["down"], None, 400),
    ("PUT", "/api/v1/overrides/pools/us-east", {"state": "sideways"}, None, 400),
    ("PUT", "/api/v1/overrides/pools/us-east", {"state": "down", "extra": 1}, None, 400),
    ("PUT", "/api/v1/overrides/pools/us-east", {}, None, 400),
    ("PUT", "/api/v1/overrides/backends/us-east/use1-b-1", {"state": "drained"}, None, 400),
    ("PUT", "/api/v1/overrides/load_balancers/api", {"trickle_ratio": 1.5}, None, 400),
    ("PUT", "/api/v1/overrides/load_balancers/api", {"trickle_ratio": -0.1}, None, 400),
    ("PUT", "/api/v1/overrides/load_balancers/api", {"trickle_ratio": "half"}, None, 400),
    ("PUT", "/api/v1/overrides/load_balancers/api", {"trickle_ratio": True}, None, 400),
    ("PUT", "/api/v1/overrides/pools/nosuch", {"state": "down"}, None, 404),
    ("PUT", "/api/v1/overrides/backends/us-east/nosuch", {"state": "down"}, None, 404),
    ("PUT", "/api/v1/overrides/backends/nosuch/use1-b-1", {"state": "down"}, None, 404),
    ("PUT", "/api/v1/overrides/load_balancers/nosuch", {"trickle_ratio": 0.5}, None, 404),
    ("DELETE", "/api/v1/overrides/pools/nosuch", None, None, 404),
    ("PUT", "/api/v1/overrides/pools/us-east", None, b'{"state": "' + b"x" * 70000 + b'"}', 413),
]


@pytest.mark.parametrize(("method", "path", "body", "raw", "code"), BAD_WRITES)
def test_bad_writes_get_a_clear_error_and_change_nothing(
    admin, method, path, body, raw, code
) -> None:
    store = admin.server.store
    generation = store.view.generation
    status, reply = http(admin.admin_port, method, path, body, TOKEN, raw=raw)
    assert status == code and isinstance(reply, dict) and reply["error"]
    assert store.view.generation == generation
    assert (store.backend_overrides, store.pool_overrides, store.trickle_overrides) == ({}, {}, {})
    assert not (store.state_dir / "overrides.json").exists()
    assert ask(admin.port, "mail.example.test").rr  # still serving


# -- writes: effects ----------------------------------------------------------------------------
def lb_answer(port: int) -> str:
    return str(ask(port, "api.example.test").rr[0].rdata)


def test_pool_override_changes_answers_at_once_and_is_persisted(admin) -> None:
    assert api_address(admin.port) in {"192.0.2.10", "192.0.2.11"}
    assert (
        http(admin.admin_port, "PUT", "/api/v1/overrides/pools/us-east", {"state": "down"}, TOKEN)[
            0
        ]
        == 200
    )
    assert api_address(admin.port) in {"198.51.100.10", "198.51.100.11"}
    saved = json.loads((admin.server.store.state_dir / "overrides.json").read_text())
    assert saved["pools"] == {"us-east": "down"}
    assert (
        http(admin.admin_port, "DELETE", "/api/v1/overrides/pools/us-east", token=TOKEN)[0] == 200
    )
    assert api_address(admin.port) in {"192.0.2.10", "192.0.2.11"}


def test_backend_drain_and_trickle_override(admin) -> None:
    http(
        admin.admin_port,
        "PUT",
        "/api/v1/overrides/backends/us-east/use1-b-1",
        {"state": "drain"},
        TOKEN,
    )
    http(
        admin.admin_port,
        "PUT",
        "/api/v1/overrides/load_balancers/api",
        {"trickle_ratio": 0.0},
        TOKEN,
    )
    assert {lb_answer(admin.port) for _ in range(30)} == {"192.0.2.11"}  # drained one left out
    http(
        admin.admin_port,
        "PUT",
        "/api/v1/overrides/load_balancers/api",
        {"trickle_ratio": 1.0},
        TOKEN,
    )
    assert {lb_answer(admin.port) for _ in range(30)} <= {
        "198.51.100.10",
        "198.51.100.11",
    }  # manual failover
    _, status = http(admin.admin_port, "GET", "/api/v1/status")
    kinds = [e["kind"] for e in status["events"]]
    assert kinds.count("override") == 3
    assert status["overrides"]["load_balancers"] == {"api": {"trickle_ratio": 1.0}}


def test_reload_through_the_api(admin, config_copy) -> None:
    path = config_copy / "example.test.yaml"
    path.write_text(path.read_text().replace("mail: {A: 192.0.2.25", "mail: {A: 192.0.2.26"))
    status, body = http(admin.admin_port, "POST", "/api/v1/reload", token=TOKEN)
    assert (status, body["generation"]) == (200, 2)
    assert str(ask(admin.port, "mail.example.test").rr[0].rdata) == "192.0.2.26"
    path.write_text(path.read_text().replace("ttl: 3600", "ttl: soon"))
    status, body = http(admin.admin_port, "POST", "/api/v1/reload", token=TOKEN)
    assert status == 400 and any("ttl: expected a whole number" in e for e in body["errors"])
    assert str(ask(admin.port, "mail.example.test").rr[0].rdata) == "192.0.2.26"
    assert http(admin.admin_port, "GET", "/readyz")[1]["generation"] == 2


def test_forced_pool_down_survives_a_restart_of_dnsd_serve(config_copy, tmp_path) -> None:
    state = tmp_path / "persist"
    env = {"DNSD_ADMIN_TOKEN": TOKEN}
    with DnsdProcess(config_copy, "--state-dir", str(state), env=env) as dnsd:
        assert api_address(dnsd.port) in {"192.0.2.10", "192.0.2.11"}
        status, _ = http(
            dnsd.admin_port, "PUT", "/api/v1/overrides/pools/us-east", {"state": "down"}, TOKEN
        )
        assert status == 200
        assert api_address(dnsd.port) in {"198.51.100.10", "198.51.100.11"}  # immediately
    with DnsdProcess(config_copy, "--state-dir", str(state), env=env) as dnsd:
        assert api_address(dnsd.port) in {"198.51.100.10", "198.51.100.11"}  # after a restart
        assert http(dnsd.admin_port, "GET", "/api/v1/status")[1]["overrides"]["pools"] == {
            "us-east": "down"
        }


def test_json_logs(config_copy) -> None:
    with DnsdProcess(config_copy, "--log-format", "json", "--query-log-sample", "1") as dnsd:
        ask(dnsd.port, "mail.example.test")
        dnsd.wait_for_log('"event": "query"')
    records = [json.loads(line) for line in dnsd.lines if line.startswith("{")]
    query = next(r for r in records if r.get("event") == "query")
    assert query["qname"] == "mail.example.test." and query["answer"] == ["192.0.2.25"]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)


def test_explain_against_a_running_server(config_copy) -> None:
    import subprocess
    import sys

    with DnsdProcess(config_copy, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        http(dnsd.admin_port, "PUT", "/api/v1/overrides/pools/eu-west", {"state": "down"}, TOKEN)
        proc = subprocess.run(
            [sys.executable, "-m", "dnsd", "explain", "www.example.test", "--client", "81.2.69.142",
             "--server", f"http://127.0.0.1:{dnsd.admin_port}", "--json"],
            capture_output=True, text=True, timeout=20,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["region"] == "WEU" and info["pool"] == "us-east"  # live: eu-west is down
    assert {c["pool"]: c["healthy"] for c in info["candidates"]}["eu-west"] is False


def test_an_override_that_cannot_be_persisted_is_not_applied(admin, tmp_path) -> None:
    """Persist first, then apply: else it would vanish at the next restart."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    blocker = state / "overrides.json"  # a directory where the file must go: not replaceable
    assert not blocker.exists()
    blocker.mkdir()
    try:
        status, body = http(
            admin.admin_port, "PUT", "/api/v1/overrides/pools/us-east", {"state": "down"}, TOKEN
        )
        assert status == 503 and "not applied" in body["error"]
        assert admin.server.store.pool_overrides == {}
        assert http(admin.admin_port, "GET", "/api/v1/status")[1]["overrides"]["pools"] == {}
    finally:
        blocker.rmdir()
    status, _ = http(
        admin.admin_port, "PUT", "/api/v1/overrides/pools/us-east", {"state": "down"}, TOKEN
    )
    assert status == 200 and admin.server.store.pool_overrides == {"us-east": "down"}


# -- hardening ------------------------------------------------------------------------
POOL = "/api/v1/overrides/pools/us-east"


@pytest.mark.parametrize(
    ("raw", "headers", "message"),
    [
        (b'{"state": null}', {}, "DELETE removes"),
        (b'{"state": "down", "state": "up"}', {}, "duplicate key"),
        (b'{"state": "down"}', {"Content-Type": "text/plain"}, "Content-Type"),
        (b'{"state": "down"}', {"Content-Type": "application/json; charset=latin-1"}, "UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, {}, None),  # 200 KB: over the body limit
        (b"[" * 20_000 + b"]" * 20_000, {}, "not valid JSON"),  # too deep to parse
        (b'{"state": 1e999}', {}, "state must be a string"),
        (b'{"state": "\xff"}', {}, "not valid JSON"),
        (b"\xef\xbb\xbf{}", {}, "not valid JSON"),
    ],
)
def test_bad_bodies_get_a_json_400_and_change_nothing(admin, raw, headers, message) -> None:
    status, body = http(admin.admin_port, "PUT", POOL, token=TOKEN, raw=raw, headers=headers)
    assert status in (400, 413) and isinstance(body, dict) and "error" in body
    if message:
        assert status == 400 and message in body["error"], body
    assert admin.server.store.pool_overrides == {}


def test_the_auth_scheme_is_case_insensitive(admin) -> None:
    headers = {"Authorization": f"bearer {TOKEN}"}
    assert http(admin.admin_port, "PUT", POOL, {"state": "down"}, headers=headers)[0] == 200


def test_wrong_tokens_lock_out_wrong_tokens_only(admin) -> None:
    for _ in range(5):
        assert http(admin.admin_port, "PUT", POOL, {"state": "down"}, "guess")[0] == 403
    status, body = http(admin.admin_port, "PUT", POOL, {"state": "down"}, "guess")
    assert status == 429 and "retry in" in body["error"]
    assert admin.server.store.pool_overrides == {}
    status, body = http(admin.admin_port, "PUT", POOL, {"state": "down"}, TOKEN)
    assert status == 200  # the right token is never locked out
    assert http(admin.admin_port, "DELETE", POOL, token=TOKEN)[0] == 200
    assert http(admin.admin_port, "GET", "/api/v1/status")[0] == 200  # reads stay open


def test_a_rebound_host_name_cannot_read_the_api(admin) -> None:
    """DNS rebinding: a page at evil.example whose name now points at 127.0.0.1."""
    evil = {"Host": f"evil.example:{admin.admin_port}"}
    status, body = http(admin.admin_port, "GET", "/api/v1/status", headers=evil)
    assert status == 421 and "Host" in body["error"]
    for host in (f"localhost:{admin.admin_port}", "127.0.0.1", f"[::1]:{admin.admin_port}"):
        assert http(admin.admin_port, "GET", "/healthz", headers={"Host": host})[0] == 200


@pytest.mark.parametrize(
    "query",
    ["name=www.example.test&type=NOSUCH", "name=" + "a" * 300, "name=x&client=1.2.3.4.5",
     "name=x&ecs=1.2.3.0/99999", "name=x&ecs=" + "9" * 5000, "name=%FF%FE"],
)  # fmt: skip
def test_bad_explain_parameters_get_a_json_400(admin, query) -> None:
    status, body = http(admin.admin_port, "GET", f"/api/v1/explain?{query}")
    assert status == 400 and "error" in body


def test_an_admin_connection_must_send_its_headers_in_time(config_copy, monkeypatch) -> None:
    """Slow or silent clients are cut off (the production timeout is 10 s; 0.3 s here)."""
    import socket

    import dnsd.serve.admin_listener

    monkeypatch.setattr(dnsd.serve.admin_listener, "ADMIN_HEADER_TIMEOUT_S", 0.3)
    srv = ServerThread(config_copy, admin_token=TOKEN).start()
    try:
        silent = socket.create_connection(("127.0.0.1", srv.admin_port))
        dribble = socket.create_connection(("127.0.0.1", srv.admin_port))
        dribble.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        for s in (silent, dribble):  # each waits for the server's 0.3 s header timeout
            s.settimeout(2)
            assert s.recv(100) == b""  # closed by the server
            s.close()
        assert http(srv.admin_port, "GET", "/healthz")[0] == 200
    finally:
        srv.stop()


def test_an_admin_request_must_arrive_whole_in_time(config_copy, monkeypatch) -> None:
    """A body (by Content-Length or in chunks) or a later request's headers trickled a
    byte at a time is cut off and counted (10 s in production; 0.5 s here); a request
    that arrives whole in time is served, and its connection kept."""
    import contextlib
    import socket
    import time

    import dnsd.serve.admin_listener

    monkeypatch.setattr(dnsd.serve.admin_listener, "ADMIN_REQUEST_TIMEOUT_S", 0.5)
    srv = ServerThread(config_copy, admin_token=TOKEN).start()
    head = b"PUT /api/v1/overrides/pools/us-east HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    starts = {
        "length": head + b"Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{",
        "chunked": head + b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"sta\r\n40\r\n',
        "later headers": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /healthz HTTP/1.1\r\nX-Slow: ",
    }
    try:
        slow = {}
        for name, start in starts.items():
            slow[name] = s = socket.create_connection(("127.0.0.1", srv.admin_port))
            s.sendall(start)
        for _ in range(8):  # a byte every 0.1 s: never quiet, never whole
            time.sleep(0.1)
            for s in slow.values():
                with contextlib.suppress(OSError):
                    s.sendall(b"X")
        for s in slow.values():
            s.settimeout(2)  # aiohttp alone would read on for 10 s or more
            with contextlib.suppress(ConnectionResetError):
                while s.recv(65536):
                    pass
            s.close()
        assert srv.server.admin.guard.request_timeouts == 3
        body = json.dumps({"state": "down"}).encode()
        whole = socket.create_connection(("127.0.0.1", srv.admin_port))
        whole.sendall(head + b"Content-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body))  # fmt: skip
        time.sleep(0.3)  # under the timeout
        whole.sendall(body)
        whole.settimeout(2)
        assert whole.recv(65536).startswith(b"HTTP/1.1 401")  # answered: no token
        time.sleep(0.4)  # past the first request's start + 0.5 s: it was whole
        whole.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert whole.recv(65536).startswith(b"HTTP/1.1 200")
        whole.close()
        assert srv.server.admin.guard.request_timeouts == 3
    finally:
        srv.stop()
