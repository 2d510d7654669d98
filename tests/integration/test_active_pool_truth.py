"""The active pool is the truth: with a trickle of 1.0 (a manual failover)
or a pool forced down, /api/v1/status shows, for every client region, the pool that answers
now — the one `dig` gets — and that the region is off its first choice."""

from __future__ import annotations

from pathlib import Path

from tests.admin_client import http
from tests.builders import primary_standby_zone
from tests.dnsclient import ask
from tests.processes import DnsdProcess

TOKEN = "truth-token"
CONFIG = primary_standby_zone("truth.test")


def web(port: int) -> dict:
    _, status = http(port, "GET", "/api/v1/status?lb=web")
    return next(lb for lb in status["load_balancers"] if lb["name"] == "web")


def test_trickle_one_and_a_pool_override_show_what_is_served(tmp_path: Path) -> None:
    (tmp_path / "truth.yaml").write_text(CONFIG)
    with DnsdProcess(tmp_path, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        before = web(dnsd.admin_port)
        assert set(before["active"].values()) == {"primary"} and before["failed_over"] == []
        assert str(ask(dnsd.port, "www.truth.test").rr[0].rdata) == "192.0.2.10"
        body = {"trickle_ratio": 1.0}
        put = http(dnsd.admin_port, "PUT", "/api/v1/overrides/load_balancers/web", body, TOKEN)
        assert put[0] == 200, put
        manual = web(dnsd.admin_port)
        assert set(manual["active"].values()) == {"standby"}, manual["active"]
        assert sorted(manual["failed_over"]) == sorted(manual["active"])  # every region
        assert all(
            str(ask(dnsd.port, "www.truth.test").rr[0].rdata) == "192.0.2.20" for _ in range(20)
        )
        http(dnsd.admin_port, "DELETE", "/api/v1/overrides/load_balancers/web", token=TOKEN)
        assert set(web(dnsd.admin_port)["active"].values()) == {"primary"}
        down = {"state": "down"}
        assert (
            http(dnsd.admin_port, "PUT", "/api/v1/overrides/pools/primary", down, TOKEN)[0] == 200
        )
        forced = web(dnsd.admin_port)
        assert set(forced["active"].values()) == {"standby"} and len(forced["failed_over"]) == 14
        assert str(ask(dnsd.port, "www.truth.test").rr[0].rdata) == "192.0.2.20"
