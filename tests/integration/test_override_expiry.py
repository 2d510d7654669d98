"""Overrides with a reason and an expiry: listed with who set them and why, removed by
themselves when they expire — also on a node that was down at the time (persisted)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.admin_client import http
from tests.integration.test_health_server import OVERRIDE_CONFIG, address
from tests.processes import DnsdProcess
from tests.waiting import until

TOKEN = "expiry-token"
ENV = {"DNSD_ADMIN_TOKEN": TOKEN}


def _zones(tmp_path: Path) -> Path:
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "h.yaml").write_text(OVERRIDE_CONFIG)
    return zones


def test_an_override_with_for_is_listed_and_expires_by_itself(tmp_path: Path) -> None:
    with DnsdProcess(_zones(tmp_path), env=ENV) as dnsd:
        body = {"state": "down", "reason": "drill: eu outage", "for": "2s"}
        status, reply = http(dnsd.admin_port, "PUT", "/api/v1/overrides/pools/first", body, TOKEN)
        assert status == 200 and reply["expires"].endswith("Z")
        assert address(dnsd.port) == "192.0.2.20"
        status, listed = http(dnsd.admin_port, "GET", "/api/v1/overrides", token=TOKEN)
        assert status == 200
        [entry] = listed["overrides"]
        assert entry["kind"] == "pool" and entry["target"] == "first" and entry["state"] == "down"
        assert entry["actor"] and entry["reason"] == "drill: eu outage"
        assert entry["since"].endswith("Z") and entry["expires"].endswith("Z")
        took = until(lambda: address(dnsd.port) == "192.0.2.10", 5.0, "the override expired")
        assert took <= 3.0
        status, listed = http(dnsd.admin_port, "GET", "/api/v1/overrides", token=TOKEN)
        assert listed["overrides"] == []
        status, doc = http(dnsd.admin_port, "GET", "/api/v1/status")
        overrides = [e for e in doc["events"] if e["kind"] == "override"]
        expired = [e for e in overrides if e["cause"] == "override expired"]
        assert expired and expired[0]["pool"] == "first" and expired[0]["actor"] == "system"
        [made] = [e for e in overrides if e["cause"] == "override"]  # who set it, and why
        assert made["actor"] == "DNSD_ADMIN_TOKEN" and made["reason"] == "drill: eu outage"


def test_an_override_expires_on_a_node_that_was_down_when_it_should_have(tmp_path: Path) -> None:
    zones, state = _zones(tmp_path), tmp_path / "state"
    args = ("--state-dir", str(state))
    with DnsdProcess(zones, *args, env=ENV) as dnsd:
        ends = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
        body = {"state": "down", "expires": ends}
        status, _ = http(dnsd.admin_port, "PUT", "/api/v1/overrides/pools/first", body, TOKEN)
        assert status == 200 and address(dnsd.port) == "192.0.2.20"
        dnsd.proc.kill()  # type: ignore[union-attr]
        dnsd.proc.wait()  # type: ignore[union-attr]
    # The expiry passes while the node is down: its own state file, with the time moved on.
    document = json.loads((state / "overrides.json").read_text())
    [meta] = document["meta"].values()
    assert meta["expires"] > time.time()
    meta["expires"] = time.time() - 1
    (state / "overrides.json").write_text(json.dumps(document))
    with DnsdProcess(zones, *args, env=ENV) as dnsd:
        until(lambda: address(dnsd.port) == "192.0.2.10", 2.0, "the expired override removed")
        status, listed = http(dnsd.admin_port, "GET", "/api/v1/overrides", token=TOKEN)
        assert listed["overrides"] == []


def test_bad_reason_or_expiry_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    with DnsdProcess(_zones(tmp_path), env=ENV) as dnsd:
        bad = [
            {"state": "down", "reason": "x" * 201},
            {"state": "down", "for": "soon"},
            {"state": "down", "expires": "2001-01-01T00:00:00Z"},
            {"state": "down", "expires": "tomorrow"},
            {"state": "down", "for": "1m", "expires": "2099-01-01T00:00:00Z"},
        ]
        for body in bad:
            status, reply = http(
                dnsd.admin_port, "PUT", "/api/v1/overrides/pools/first", body, TOKEN
            )
            assert status == 400, (body, reply)
        assert http(dnsd.admin_port, "GET", "/api/v1/overrides", token=TOKEN)[1]["overrides"] == []
        assert address(dnsd.port) == "192.0.2.10"
        # without a token the list (it names tokens) is refused
        assert http(dnsd.admin_port, "GET", "/api/v1/overrides")[0] == 401
