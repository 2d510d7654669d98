"""Build, inspect and remove the lab (topology.py), and talk to it from this process.

`Lab.up()` makes the namespaces and links, then starts Redis (a primary, a replica and
three sentinels), each region's demo
backends, its dnsd node (`--node`, `--pop-region`, sharing health through Redis) and its
unbound (a stub zone listing all three nodes). `Lab.down()` stops every process in a lab
namespace and removes the namespaces, whatever state a run left them in. The working
directory (config, logs, state) is WORKDIR.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from dnslib import DNSRecord

from dnsd.lab import netns
from dnsd.lab.netns import LabError, entered, ip, spawn
from dnsd.lab.topology import (
    BACKEND_PORT,
    BRIDGE,
    HUB,
    MASK,
    REDIS,
    REDIS_NS,
    REDIS_REPLICA,
    REDIS_URL,
    REGIONS,
    SENTINELS,
    TOKEN,
    ZONE,
    Region,
    config,
    redis_config,
    sentinel_config,
    unbound_config,
)

WORKDIR = Path(os.environ.get("DNSD_LAB_DIR", "/run/dnsd-lab"))
KEY = "dnsd-lab-cluster-key-0123456789abcdef"


def ask(ns: str, server: str, name: str = f"www.{ZONE}", timeout: float = 1.0) -> list[str] | None:
    """The A answers for `name` from `server`, asked from inside `ns`; None: no answer."""
    with entered(ns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.settimeout(timeout)
        sock.sendto(DNSRecord.question(name).pack(), (server, 53))
        reply = DNSRecord.parse(sock.recv(4096))
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
    return sorted(str(rr.rdata) for rr in reply.rr if rr.rtype == 1)


def http(ns: str, url: str, body: Any = None, method: str = "GET") -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with entered(ns):
        response = urllib.request.urlopen(request, timeout=5)  # the socket is made here
    with response:
        return json.loads(response.read().decode())


class Lab:
    def __init__(self, workdir: Path = WORKDIR) -> None:
        self.dir = workdir

    # -- up --------------------------------------------------------------------------------------
    def up(self) -> None:
        why = netns.available()
        if why is not None:
            raise LabError(why)
        self.down()
        (self.dir / "zones").mkdir(parents=True)
        (self.dir / "logs").mkdir()
        (self.dir / "zones" / "lab.yaml").write_text(config())
        (self.dir / "cluster.key").write_text(KEY)
        try:
            self._network()
            self._processes()
            self._wait_ready()
        except BaseException:
            self.down()
            raise

    def _network(self) -> None:
        ip("netns", "add", HUB)
        ip("link", "set", "lo", "up", ns=HUB)
        ip("link", "add", BRIDGE, "type", "bridge", ns=HUB)
        ip("link", "set", BRIDGE, "up", ns=HUB)
        spokes = [(REDIS_NS, [REDIS, REDIS_REPLICA, *SENTINELS])] + [
            (r.ns, [r.node, r.resolver, r.control, *r.backends.values()]) for r in REGIONS
        ]
        for ns, addresses in spokes:
            ip("netns", "add", ns)
            ip("link", "set", "lo", "up", ns=ns)
            port = "v-" + ns.removeprefix(netns.PREFIX)
            ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns, ns=HUB)
            ip("link", "set", port, "master", BRIDGE, "up", ns=HUB)
            for address in addresses:
                ip("addr", "add", f"{address}/{MASK}", "dev", "eth0", ns=ns)
            ip("link", "set", "eth0", "up", ns=ns)

    def _processes(self) -> None:
        logs = self.dir / "logs"
        self.start_redis(REDIS)
        self.start_redis(REDIS_REPLICA, primary=REDIS)
        for address in SENTINELS:
            directory = self.dir / f"sentinel-{address}"
            directory.mkdir()
            (directory / "sentinel.conf").write_text(sentinel_config(address, str(directory)))
            spawn(
                REDIS_NS,
                [self.redis_binary, str(directory / "sentinel.conf"), "--sentinel"],
                logs / f"sentinel-{address}.log",
            )
        for region in REGIONS:
            self.start_backends(region)
            self.start_node(region)
            unbound_dir = self.dir / f"unbound-{region.pool}"
            unbound_dir.mkdir()
            (unbound_dir / "unbound.conf").write_text(unbound_config(region, str(unbound_dir)))
            binary = shutil.which("unbound") or "/usr/sbin/unbound"
            spawn(
                region.ns,
                [binary, "-d", "-c", str(unbound_dir / "unbound.conf")],
                logs / f"unbound-{region.pool}.log",
            )

    @property
    def redis_binary(self) -> str:
        return shutil.which("redis-server") or "/usr/bin/redis-server"

    def start_redis(self, address: str, primary: str | None = None) -> None:
        """A Redis server at `address` (again, after a kill: the sentinels then make it a
        replica of whichever is primary now)."""
        directory = self.dir / f"redis-{address}"
        directory.mkdir(exist_ok=True)
        conf = directory / "redis.conf"
        if not conf.exists():
            conf.write_text(redis_config(address, str(directory), primary))
        spawn(REDIS_NS, [self.redis_binary, str(conf)], self.dir / "logs" / f"redis-{address}.log")

    def redis_pids(self, address: str) -> list[int]:
        """The Redis server of `address` (Redis names its process `redis-server ADDR:PORT`)."""
        title = f"{address}:6379".encode()
        found = []
        for pid in netns.pids(REDIS_NS):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
            except OSError:
                continue
            if title in cmdline:
                found.append(pid)
        return found

    def primary(self) -> str | None:
        """Where the sentinels say the primary is (asked from inside the lab)."""
        with entered(REDIS_NS):
            sock = socket.create_connection((SENTINELS[0], 26379), timeout=2)
        try:
            sock.sendall(b"SENTINEL get-master-addr-by-name lab\r\n")
            reply = sock.recv(4096).decode(errors="replace").split("\r\n")
        except OSError:
            return None
        finally:
            sock.close()
        # *2 $len ADDRESS $len PORT
        return reply[2] if len(reply) > 2 and reply[0] == "*2" else None

    def start_backends(self, region: Region) -> None:
        specs = [f"{n}={a}:{BACKEND_PORT}" for n, a in region.backends.items()]
        spawn(
            region.ns,
            [
                sys.executable,
                "-m",
                "dnsd",
                "backends",
                *specs,
                "--control",
                f"{region.control}:8054",
            ],
            self.dir / "logs" / f"backends-{region.pool}.log",
        )

    def start_node(self, region: Region) -> None:
        argv = [
            sys.executable,
            "-m",
            "dnsd",
            "serve",
            str(self.dir / "zones"),
            "--listen",
            f"{region.node}:53",
            "--admin",
            f"{region.node}:8053",
            "--node",
            region.pool,
            "--pop-region",
            region.code,
            "--redis",
            REDIS_URL,
            "--redis-key-file",
            str(self.dir / "cluster.key"),
            "--cluster-nodes",
            ",".join(r.pool for r in REGIONS),
            "--state-dir",
            str(self.dir / f"state-{region.pool}"),
            "--rrl-rate",
            "0",
        ]
        spawn(
            region.ns,
            argv,
            self.dir / "logs" / f"dnsd-{region.pool}.log",
            {"DNSD_ADMIN_TOKEN": TOKEN},
        )

    def node_pids(self, region: Region) -> list[int]:
        """The dnsd process of a region (found by its listen address)."""
        found = []
        for pid in netns.pids(region.ns):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in cmdline and f"{region.node}:53".encode() in cmdline:
                found.append(pid)
        return found

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        for region in REGIONS:
            while not ask(region.ns, region.resolver, timeout=0.5):
                if time.monotonic() > deadline:
                    raise LabError(
                        f"{region.code}: no answer through its resolver; logs in {self.dir / 'logs'}"
                    )
                time.sleep(0.2)

    # -- inspect and control ---------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        spaces = netns.namespaces()
        out: dict[str, Any] = {"namespaces": spaces, "regions": {}}
        for region in REGIONS:
            if region.ns not in spaces:
                continue
            out["regions"][region.code] = {
                "node": region.node,
                "resolver": region.resolver,
                "processes": len(netns.pids(region.ns)),
                "www via resolver": ask(region.ns, region.resolver, timeout=0.5),
            }
        return out

    def node_status(self, region: Region) -> dict[str, Any]:
        return http(region.ns, f"http://{region.node}:8053/api/v1/status")

    def set_backend(
        self,
        region: Region,
        name: str,
        mode: str,
        source: str | None = None,
        slow_ms: float | None = None,
    ) -> None:
        body: dict[str, Any] = {"mode": mode}
        if source is not None:
            body["source"] = source
        if slow_ms is not None:
            body["slow_ms"] = slow_ms
        http(region.ns, f"http://{region.control}:8054/backends/{name}", body, "POST")

    def explain(self, region: Region, name: str, client: str) -> dict[str, Any]:
        url = f"http://{region.node}:8053/api/v1/explain?name={name}&client={client}"
        return http(region.ns, url)

    # -- down ------------------------------------------------------------------------------------
    def down(self) -> None:
        netns.remove_all()
        if self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)


def leftovers() -> list[str]:
    """Lab namespaces and lab processes still there (empty after `down`)."""
    found = list(netns.namespaces())
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    found += [line for line in ps.splitlines() if str(WORKDIR) in line and "ps -eo" not in line]
    return found
