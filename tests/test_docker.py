"""docker/: the compose file is valid and runs the same commands the tests run.
There is no Docker engine (nor compose plugin) on the build machines, so the checks are on
the files: structure, the dnsd command lines parsed by dnsd's own parser, the config."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

from dnsd.cli import build_parser
from dnsd.config.loader import load_config
from dnsd.drill.ports import free_port_pair
from dnsd.geo.regions import REGIONS

DOCKER = Path(__file__).parent.parent / "docker"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())
NODES = ["node-a", "node-b", "node-c"]
BACKENDS = ["b1", "b2", "us1", "eu1"]


def test_compose_services_and_network() -> None:
    services = COMPOSE["services"]
    assert set(services) == {"redis", *BACKENDS, "unbound", *NODES}
    subnet = ipaddress.ip_network(COMPOSE["networks"]["gslb"]["ipam"]["config"][0]["subnet"])
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        address = ipaddress.ip_address(service["networks"]["gslb"]["ipv4_address"])
        assert address in subnet, name
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_nodes_run_dnsd_serve_with_redis_in_three_regions() -> None:
    parser = build_parser()
    regions = []
    for name in NODES:
        service = COMPOSE["services"][name]
        args = parser.parse_args(service["command"])
        assert args.command == "serve" and args.redis == "redis://172.30.0.5:6379/0"
        assert args.node and args.pop_region in REGIONS
        assert service["build"]["dockerfile"] == "docker/Dockerfile"
        assert service["environment"]["DNSD_ADMIN_TOKEN_FILE"] == "/run/secrets/dnsd_admin_token"
        # sealed: a cluster key from a Docker secret, never --redis-insecure
        assert args.redis_key_file == "/run/secrets/dnsd_cluster_key" and not args.redis_insecure
        assert "dnsd_cluster_key" in service["secrets"]
        regions.append(args.pop_region)
    assert len(set(regions)) == 3
    key_file = COMPOSE["secrets"]["dnsd_cluster_key"]["file"]
    assert len((DOCKER / key_file).read_bytes().strip()) >= 16  # what read_key accepts
    config, _ = load_config(DOCKER / "zones")
    assert set(config.monitors["web"].sources) == set(regions)  # one probe source per node


def test_backends_and_resolver_match_the_config() -> None:
    config, _ = load_config(DOCKER / "zones")
    configured = {
        b.name: (str(b.address), b.port) for p in config.pools.values() for b in p.backends
    }
    for name in BACKENDS:  # each backend container serves the address and port the config names
        service = COMPOSE["services"][name]
        args = build_parser().parse_args(service["command"])
        [spec] = args.backends
        backend, _, listen = spec.partition("=")
        address = service["networks"]["gslb"]["ipv4_address"]
        assert backend == name and configured[name] == (address, int(listen.rsplit(":", 1)[1]))
    stubs = [
        line.split()[-1]
        for line in (DOCKER / "unbound" / "unbound.conf").read_text().splitlines()
        if "stub-addr" in line
    ]
    node_ips = [COMPOSE["services"][n]["networks"]["gslb"]["ipv4_address"] for n in NODES]
    assert stubs == [f"{ip}@5353" for ip in node_ips]


def test_dockerfile_runs_as_non_root_with_a_healthcheck() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    assert "\nUSER dnsd\n" in text and "useradd --system" in text
    assert "HEALTHCHECK" in text and "/healthz" in text
    assert 'ENTRYPOINT ["dnsd"]' in text


def test_dnsd_backends_command_serves_and_switches() -> None:
    port, control = free_port_pair(), free_port_pair()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dnsd", "backends", f"b1=127.0.0.1:{port}", "--control", f"127.0.0.1:{control}"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while "control on" not in (proc.stdout.readline() if proc.stdout else ""):
            assert time.monotonic() < deadline
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").status == 200
        request = urllib.request.Request(
            f"http://127.0.0.1:{control}/backends/b1",
            data=json.dumps({"mode": "503"}).encode(),
            method="POST",
        )
        assert json.loads(urllib.request.urlopen(request).read())["b1"]["mode"] == "503"
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz")
            raise AssertionError("expected 503")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
