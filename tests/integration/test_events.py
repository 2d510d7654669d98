"""Events that explain themselves, end to end with `dnsd serve`: a real HTTP backend that
starts answering 503 → one `failover` webhook naming `HTTP 503 from WEU` and the actor
`probe`, then a `failback` once it recovers, and nothing at all at start (no
unknown → healthy); a trickle of 1.0 through the admin API → a `failover` naming the
token and `trickle 1.0`; a nested load balancer's events name only the regions that reach
it; config API changes and reloads are `config` events; the events survive a restart and
`GET /api/v1/events` filters them."""

from __future__ import annotations

import hashlib
import json
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dnsd.drill.backend import DemoBackend
from dnsd.geo.regions import REGIONS
from tests.admin_client import http
from tests.dnsclient import ask
from tests.integration.test_webhooks import SECRET, Receiver
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess
from tests.waiting import got, real_time_passes, until

ADMIN = "events-admin-token"  # DNSD_ADMIN_TOKEN: named "DNSD_ADMIN_TOKEN"
ALICE = "alice-on-call-secret-0123"  # an override token named "alice"
BOB = "bob-on-call-secret-0123456"  # an override token named "bob"
ENV = {"DNSD_ADMIN_TOKEN": ADMIN}
KINDS = "backend_health, pool_health, failover, failback, fail_open, override, config"
ALL_REGIONS = len(REGIONS) + 1  # and clients no database places ("unknown")

ZONE = """\
zone: ev.test
soa: {{mname: ns1.ev.test., rname: h.ev.test.}}
records:
  "@": {{NS: ns1.ev.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
  eu: {{lb: outer}}
monitors:
  m: {{type: http, interval: 200ms, timeout: 1s, unhealthy_threshold: 2, healthy_threshold: 2,
      sources: [WEU]}}
pools:
  primary: {{monitor: m, backends: [{{name: p1, address: 127.0.0.1, port: {port}}}]}}
  standby: {{backends: [{{name: s1, address: 192.0.2.20}}]}}
  eu-a: {{backends: [{{name: a1, address: 192.0.2.31}}]}}
  eu-b: {{backends: [{{name: b1, address: 192.0.2.32}}]}}
load_balancers:
  web: {{ttl: 1, default_pools: [primary, standby]}}
  outer: {{ttl: 1, steering: geo, region_pools: {{WEU: ["lb:inner"]}}, default_pools: [standby]}}
  inner: {{ttl: 1, default_pools: [eu-a, eu-b]}}
"""


def _setup(tmp_path: Path, backend_port: int, hook_port: int) -> tuple[Path, tuple[str, ...]]:
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "ev.yaml").write_text(ZONE.format(port=backend_port))
    server_file = tmp_path / "dnsd.yaml"
    alice = hashlib.sha256(ALICE.encode()).hexdigest()
    bob = hashlib.sha256(BOB.encode()).hexdigest()
    server_file.write_text(
        f"webhooks:\n  - {{url: 'http://127.0.0.1:{hook_port}/hook', events: [{KINDS}], "
        f"secret: {SECRET}}}\n"
        f"tokens:\n  - {{name: alice, scope: override, sha256: {alice}}}\n"
        f"  - {{name: bob, scope: override, sha256: {bob}}}\n"
    )
    args = ("--config", str(server_file), "--state-dir", str(tmp_path / "state"))
    return zones, args


def received(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(body) for _, body, _ in list(receiver.received)]


def wait_for(
    receiver: Receiver, match: Callable[[dict[str, Any]], bool], timeout: float = 6.0
) -> dict[str, Any]:
    found = got(lambda: [e for e in received(receiver) if match(e)], timeout,
                lambda: f"no such event; received {received(receiver)}")  # fmt: skip
    return found[0]


def probed(backend: DemoBackend, rounds: int) -> None:
    """`rounds` more probes reached the backend (healthy_threshold is 2): the first
    verdicts are in, and what they would have sent has had time to arrive."""
    before = sum(backend.requests.values())
    until(lambda: sum(backend.requests.values()) >= before + rounds, 10.0, f"{rounds} probes")


def events(port: int, query: str = "") -> list[dict[str, Any]]:
    status, body = http(port, "GET", "/api/v1/events" + query)
    assert status == 200, body
    return body["events"]


def address(port: int, name: str = "www.ev.test") -> str:
    return str(ask(port, name).rr[0].rdata)


def test_a_failing_backend_fails_over_and_back_and_the_events_survive_a_restart(
    tmp_path: Path,
) -> None:
    loop = LoopThread()
    try:
        backend = loop.call(DemoBackend("p1", control_port=None).start())
        receiver = Receiver(loop)
        zones, args = _setup(tmp_path, backend.port, loop.call(receiver.start()))
        with DnsdProcess(zones, *args, env=ENV) as dnsd:
            probed(backend, 6)  # every first verdict is in
            assert received(receiver) == [] and events(dnsd.admin_port) == []  # no start noise
            assert address(dnsd.port) == "127.0.0.1"
            loop.call(backend.set_mode("503"))
            failover = wait_for(receiver, lambda e: e["event"] == "failover")
            assert failover["cause"] == "HTTP 503 from WEU" and failover["actor"] == "probe"
            assert (failover["kind"], failover["lb"], failover["pool"]) == (
                "failover",
                "web",
                "standby",
            )
            assert len(failover["regions"]) == ALL_REGIONS and failover["time"].endswith("Z")
            health = wait_for(receiver, lambda e: e["event"] == "backend_health")
            assert (health["pool"], health["backend"], health["new"]) == (
                "primary",
                "p1",
                "unhealthy",
            )
            assert health["cause"] == "HTTP 503 from WEU" and health["actor"] == "probe"
            assert address(dnsd.port) == "192.0.2.20"
            loop.call(backend.set_mode("ok"))
            failback = wait_for(receiver, lambda e: e["event"] == "failback")
            assert (failback["lb"], failback["pool"], failback["actor"]) == (
                "web",
                "primary",
                "probe",
            )
            assert failback["cause"] == "probe ok from WEU"
            assert len(failback["regions"]) == ALL_REGIONS
            assert address(dnsd.port) == "127.0.0.1"
            metrics = http(dnsd.admin_port, "GET", "/metrics")[1]
            assert 'dnsd_failovers_total{lb="web"} 1.0' in metrics

            def in_step() -> bool:  # the webhooks have caught up with the journal
                api = events(dnsd.admin_port)
                listed = {(e["kind"], e["time"]) for e in api if e["kind"] != "probe"}
                return {(e["kind"], e["time"]) for e in received(receiver)} == listed

            until(in_step, 5.0, "the webhooks carry what the API lists")
            before_restart = events(dnsd.admin_port)
            kinds = [e["kind"] for e in before_restart]
            assert kinds.count("failover") == 1 and kinds.count("failback") == 1
            # the webhooks, the API and the status page carry the same record
            sent = {(e["kind"], e["time"]) for e in received(receiver)}
            listed = {(e["kind"], e["time"]) for e in before_restart if e["kind"] != "probe"}
            assert sent == listed
            status_events = http(dnsd.admin_port, "GET", "/api/v1/status")[1]["events"]
            assert list(reversed(status_events)) == before_restart
        hooks_before = len(receiver.received)
        with DnsdProcess(zones, *args, env=ENV) as dnsd:
            probed(backend, 6)  # the first verdicts are in again
            assert events(dnsd.admin_port) == before_restart  # read back from events.jsonl
            assert len(receiver.received) == hooks_before  # a restart sends nothing
            port = dnsd.admin_port
            failback_at = failback["time"]
            since = events(port, f"?since={quote(failback_at)}")
            assert all(e["time"] >= failback_at for e in since)
            assert "failback" in [e["kind"] for e in since] and "failover" not in str(since)
            assert [e["kind"] for e in events(port, "?kind=failover,failback")] == [
                "failover", "failback",
            ]  # fmt: skip
            assert {e["kind"] for e in events(port, "?lb=web")} == {"failover", "failback"}
            assert events(port, "?lb=nope") == []
            assert len(events(port, "?limit=1")) == 1
            bad = {
                "?since=yesterday": "since: an ISO 8601 time",
                "?kind=outage": "kind: unknown kind 'outage'",
                "?limit=0": "limit: 1 to",
                "?lbs=web": "unknown parameter 'lbs'",
            }
            for query, message in bad.items():
                status, body = http(port, "GET", "/api/v1/events" + query)
                assert status == 400 and message in body["error"], (query, body)
        assert (tmp_path / "state" / "events.jsonl").exists()
    finally:
        loop.call(backend.stop())
        loop.close()


def test_overrides_and_config_changes_name_their_actor_and_cause(tmp_path: Path) -> None:
    loop = LoopThread()
    try:
        backend = loop.call(DemoBackend("p1", control_port=None).start())
        receiver = Receiver(loop)
        zones, args = _setup(tmp_path, backend.port, loop.call(receiver.start()))
        with DnsdProcess(zones, *args, env=ENV) as dnsd:
            port = dnsd.admin_port
            trickle = {"trickle_ratio": 1.0, "reason": "INC-7: primary slow"}
            status, _ = http(port, "PUT", "/api/v1/overrides/load_balancers/web", trickle, ALICE)
            assert status == 200
            failover = wait_for(receiver, lambda e: e["event"] == "failover")
            assert (failover["lb"], failover["actor"], failover["cause"]) == (
                "web",
                "alice",
                "trickle 1.0",
            )
            assert len(failover["regions"]) == ALL_REGIONS and failover["pool"] == "standby"
            override = wait_for(receiver, lambda e: e["event"] == "override")
            assert (override["lb"], override["actor"], override["cause"]) == (
                "web",
                "alice",
                "trickle 1.0",
            )
            assert override["reason"] == "INC-7: primary slow"
            assert address(dnsd.port) == "192.0.2.20"
            http(port, "DELETE", "/api/v1/overrides/load_balancers/web", token=ALICE)
            failback = wait_for(receiver, lambda e: e["event"] == "failback")
            assert (failback["actor"], failback["cause"]) == ("alice", "trickle removed")
            # A nested load balancer: only WEU reaches `inner` (through `outer`).
            http(
                port, "PUT", "/api/v1/overrides/load_balancers/inner", {"trickle_ratio": 1.0}, ALICE
            )
            inner = wait_for(receiver, lambda e: e["event"] == "failover" and e["lb"] == "inner")
            outer = wait_for(receiver, lambda e: e["event"] == "failover" and e["lb"] == "outer")
            assert inner["regions"] == ["WEU"] and outer["regions"] == ["WEU"]
            assert inner["pool"] == "eu-b" and outer["changes"]["WEU"] == {
                "from": "lb:inner -> eu-a", "to": "lb:inner -> eu-b",
            }  # fmt: skip
            # The config API and reloads: `config` events with who and why.
            record = {"A": ["192.0.2.99"], "ttl": 60}
            route = "/api/v1/config/zones/ev.test/records/new"
            assert http(port, "PUT", route, record, ADMIN)[0] in (200, 201)
            changed = wait_for(receiver, lambda e: e["event"] == "config")
            assert changed["actor"] == "DNSD_ADMIN_TOKEN"
            assert changed["cause"] == "config API: PUT zones/ev.test/records/new"
            assert http(port, "POST", "/api/v1/reload", token=ADMIN)[0] == 200
            wait_for(receiver, lambda e: e["event"] == "config" and e["cause"] == "reload"
                     and e["actor"] == "DNSD_ADMIN_TOKEN")  # fmt: skip
            dnsd.signal(signal.SIGHUP)
            wait_for(receiver, lambda e: e["event"] == "config" and e["actor"] == "system")
            kinds = [e["kind"] for e in events(port, "?kind=config")]
            assert kinds == ["config"] * 3
            # refused writes change nothing and make no event
            before = len(events(port))
            assert http(port, "PUT", "/api/v1/overrides/pools/primary", {"state": "down"})[0] == 401
            assert len(events(port)) == before
    finally:
        loop.call(backend.stop())
        loop.close()


def test_two_operators_overrides_close_together_each_name_their_own_cause(tmp_path: Path) -> None:
    """Alice takes pool primary down and Bob, 34 ms later (inside one burst the failover
    watch looks at once), moves load balancer inner to its second pool: every derived event,
    in the API and in the webhooks, names the one change that made it, not both."""
    loop = LoopThread()
    try:
        backend = loop.call(DemoBackend("p1", control_port=None).start())
        receiver = Receiver(loop)
        zones, args = _setup(tmp_path, backend.port, loop.call(receiver.start()))
        with DnsdProcess(zones, *args, env=ENV) as dnsd:
            port = dnsd.admin_port
            probed(backend, 4)  # the first verdicts are in: primary is healthy
            assert address(dnsd.port) == "127.0.0.1"
            down = {"state": "down", "reason": "INC-8: primary db"}
            trickle = {"trickle_ratio": 1.0, "reason": "INC-9: eu-a drain"}
            with ThreadPoolExecutor(2) as pool:  # each request on its own, 34 ms apart
                first = pool.submit(http, port, "PUT", "/api/v1/overrides/pools/primary", down,
                                    ALICE)  # fmt: skip
                real_time_passes(0.034, "inside one burst of the failover watch")
                second = pool.submit(http, port, "PUT", "/api/v1/overrides/load_balancers/inner",
                                     trickle, BOB)  # fmt: skip
                assert first.result()[0] == 200 and second.result()[0] == 200
            expected = {
                ("failover", "web"): ("override", "alice"),
                ("pool_health", None): ("override", "alice"),
                ("failover", "inner"): ("trickle 1.0", "bob"),
                ("failover", "outer"): ("trickle 1.0", "bob"),
            }
            for (kind, lb), why in expected.items():
                sent = wait_for(receiver, lambda e, k=kind, n=lb: e["event"] == k and e["lb"] == n)
                assert (sent["cause"], sent["actor"]) == why, sent
            derived = [e for e in events(port) if e["kind"] in ("failover", "pool_health")]
            assert {(e["kind"], e["lb"]): (e["cause"], e["actor"]) for e in derived} == expected
            assert len(derived) == len(expected)
            # the audit trail names each token too (it always did)
            status, audit = http(port, "GET", "/api/v1/audit", token=ADMIN)
            assert status == 200
            tokens = [entry["token"] for entry in audit["entries"] if entry["method"] == "PUT"]
            assert tokens[-2:] == ["alice", "bob"]
    finally:
        loop.call(backend.stop())
        loop.close()
