"""Zonal affinity end to end over UDP: ECS subnets mapped to zones, real probes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from dnsd.drill.backend import DemoBackend
from tests.conftest import ServerThread

ADDRESSES = {"a1": "127.0.0.11", "a2": "127.0.0.12", "b1": "127.0.0.21", "b2": "127.0.0.22"}
ZONE_OF = {"a1": "zone-1", "a2": "zone-1", "b1": "zone-2", "b2": "zone-2"}


def config(ports: dict[str, int]) -> str:
    backends = "\n".join(
        f"      - {{name: {n}, address: {ADDRESSES[n]}, port: {ports[n]}, zone: {ZONE_OF[n]}}}"
        for n in ADDRESSES
    )
    return f"""\
zone: za.test
soa: {{mname: ns1.za.test., rname: h.za.test.}}
records:
  "@": {{NS: ns1.za.test.}}
  ns1: {{A: 192.0.2.1}}
  www: {{lb: www}}
monitors:
  m: {{type: http, path: /healthz, interval: 100ms, timeout: 500ms, healthy_threshold: 2, unhealthy_threshold: 2}}
pools:
  p:
    monitor: m
    region: ENAM
    zonal_affinity: {{mode: SPILL_CROSS_ZONE, spillover_ratio: 0.6}}
    backends:
{backends}
client_zones:
  10.1.0.0/16: zone-1
  10.2.0.0/16: zone-2
load_balancers:
  www: {{ttl: 5, default_pools: [p], max_answers: 4}}
"""


def dig_set(port: int, subnet: str) -> tuple[set[str], str]:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), "+tries=1", "+time=2", "www.za.test", f"+subnet={subnet}"],
        capture_output=True, text=True, timeout=10, check=True,
    ).stdout  # fmt: skip
    answers = {
        line.split()[-1]
        for line in out.splitlines()
        if "\tIN\tA\t" in line and not line.startswith(";")
    }
    scope = next(line.split()[-1] for line in out.splitlines() if "CLIENT-SUBNET" in line)
    return answers, scope


def test_clients_stay_in_their_zone_until_probes_push_zone_2_below_the_ratio(
    tmp_path: Path,
) -> None:
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "za.yaml").write_text(config(dict.fromkeys(ADDRESSES, 1)))
    srv = ServerThread(zones)
    srv.run_loop()
    backends = {
        n: srv.call(DemoBackend(n, host=a, control_port=None).start()) for n, a in ADDRESSES.items()
    }
    try:
        (zones / "za.yaml").write_text(config({n: b.port for n, b in backends.items()}))
        srv.call(srv.server.start())
        assert srv.reload()
        deadline = time.monotonic() + 5
        while not all(srv.server.store.view.backends.get(("p", n)) and
                      srv.server.store.view.backends[("p", n)].probed == "healthy" for n in ADDRESSES):  # fmt: skip
            assert time.monotonic() < deadline
            time.sleep(0.05)

        zone1, zone2 = {"127.0.0.11", "127.0.0.12"}, {"127.0.0.21", "127.0.0.22"}
        assert dig_set(srv.port, "10.1.3.0/24") == (zone1, "10.1.3.0/24/16")
        assert dig_set(srv.port, "10.2.3.0/24") == (zone2, "10.2.3.0/24/16")

        srv.call(backends["b1"].set_mode("503"))  # zone 2: 1 of 2 healthy = 0.5 < 0.6
        deadline = time.monotonic() + 5
        while srv.server.store.view.backends[("p", "b1")].healthy:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        spilled, _ = dig_set(srv.port, "10.2.3.0/24")
        assert spilled == {"127.0.0.11", "127.0.0.12", "127.0.0.22"}  # both zones, healthy only
        assert dig_set(srv.port, "10.1.3.0/24")[0] == zone1  # zone 1 stays home
        assert dig_set(srv.port, "192.168.1.0/24")[0] == zone1 | {
            "127.0.0.22"
        }  # no zone: original set
    finally:
        for b in backends.values():
            srv.call(b.stop())
        srv.stop()
