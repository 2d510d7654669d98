"""A small on-call scene for the status page: a real `dnsd serve` with real HTTP backends
(eu: 2, us: 1) behind three load-balanced DNS names — `www.example.com` (failover eu → us),
`api.example.com` (geo: Europe, Africa and the Middle East on eu, the rest on us) and one
long octoDNS-style generated name — and an `oncall` override token.

Shared by tests/e2e/test_status_cockpit.py and scripts/status-screenshots.py."""

from __future__ import annotations

import hashlib
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnsd.drill.backend import DemoBackend
from tests.admin_client import http
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess

TOKEN = "oncall-secret"  # the token named `oncall`, scope override
LONG_LB = "octodns-generated-eu-west-1-payments-frontend-primary-lb-with-a-very-long-name"
LONG_NAME = (
    "svc-0123456789abcdef-octodns-generated-record.eu-west-1.payments-frontend-primary.example.com"
)
EUROPE = ["WEU", "EEU", "ME", "NAF", "SAF"]


def write_scene(directory: Path, ports: dict[str, int]) -> Path:
    zones = directory / "zones"
    zones.mkdir(parents=True)
    backends = {
        pool: ", ".join(
            f"{{name: {n}, address: 127.0.0.1, port: {ports[n]}}}"
            for n in ports
            if n.startswith(pool)
        )
        for pool in ("eu", "us")
    }
    geo = ", ".join(f"{r}: [eu, us]" for r in EUROPE)
    long_owner = LONG_NAME.removesuffix(".example.com")
    (zones / "example.com.yaml").write_text(
        f"""zone: example.com
soa: {{mname: ns1.example.com., rname: hostmaster.example.com.}}
records:
  "@": {{NS: ns1.example.com.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: web}}
  api: {{lb: api}}
  {long_owner}: {{lb: {LONG_LB}}}
monitors:
  http: {{type: http, path: /healthz, interval: 300ms, timeout: 250ms,
          healthy_threshold: 1, unhealthy_threshold: 2}}
pools:
  eu: {{monitor: http, region: WEU, backends: [{backends["eu"]}]}}
  us: {{monitor: http, region: ENAM, backends: [{backends["us"]}]}}
  maintenance: {{backends: [{{name: sorry, address: 192.0.2.200}}]}}
load_balancers:
  web: {{default_pools: [eu, us], fallback_pool: maintenance}}
  api: {{steering: geo, default_pools: [us, eu], region_pools: {{{geo}}}}}
  {LONG_LB}: {{default_pools: [eu, us]}}
"""
    )
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    server = directory / "dnsd.yaml"
    server.write_text(f"tokens:\n  - {{name: oncall, scope: override, sha256: {digest}}}\n")
    return server


@dataclass
class Scene:
    dnsd: DnsdProcess
    backends: dict[str, DemoBackend]
    loop: LoopThread

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.dnsd.admin_port}/"

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return http(self.dnsd.admin_port, method, path, body, token=TOKEN)

    def status(self, query: str = "") -> dict[str, Any]:
        code, doc = http(self.dnsd.admin_port, "GET", f"/api/v1/status{query}")
        assert code == 200, doc
        return doc

    def page(self, query: str = "") -> str:
        """The status page as sent: what a client without JavaScript gets."""
        with urllib.request.urlopen(self.url + query, timeout=5) as response:
            return response.read().decode()

    def set_mode(self, backend: str, mode: str) -> None:
        self.loop.call(self.backends[backend].set_mode(mode))

    def wait(self, test: Any, timeout: float = 15.0) -> dict[str, Any]:
        """The status document once `test(doc)` holds."""
        deadline = time.monotonic() + timeout
        while True:
            doc = self.status("?limit=10")
            if test(doc):
                return doc
            assert time.monotonic() < deadline, doc
            time.sleep(0.1)


def lb_of(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(lb for lb in doc["load_balancers"] if lb["name"] == name)


def all_healthy(doc: dict[str, Any]) -> bool:
    return all(
        b["probed"] == "healthy" for p in doc["pools"] for b in p["backends"] if p["monitor"]
    )


@contextmanager
def scene(directory: Path) -> Iterator[Scene]:
    loop = LoopThread()
    names = ["eu-1", "eu-2", "us-1"]
    backends = {n: loop.call(DemoBackend(n, control_port=None).start()) for n in names}
    try:
        server = write_scene(directory, {n: b.port for n, b in backends.items()})
        with DnsdProcess(directory / "zones", "--config", str(server)) as dnsd:
            s = Scene(dnsd, backends, loop)
            s.wait(all_healthy)
            yield s
    finally:
        for b in backends.values():
            loop.call(b.stop())
        loop.close()
