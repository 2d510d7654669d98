"""Composition root: load the config, bind the listeners, reload on SIGHUP, stop on SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from dnsd.config.loader import load_config
from dnsd.errors import ConfigError
from dnsd.geo.database import GeoDatabase
from dnsd.health.scheduler import ProbeScheduler
from dnsd.health.store import HealthStore
from dnsd.net.counters import NetCounters
from dnsd.net.tcp import TcpHandler, TcpLimits
from dnsd.net.udp import UdpProtocol
from dnsd.resolve import Client, resolve
from dnsd.snapshot import NodeSettings, Snapshot, SnapshotHolder, compile_snapshot

log = logging.getLogger("dnsd.server")


@dataclass(frozen=True, slots=True)
class ServerOptions:
    config_dir: Path
    listen: tuple[tuple[str, int], ...] = (("127.0.0.1", 5353),)
    tcp_limits: TcpLimits = field(default_factory=TcpLimits)
    geoip: Path | None = None  # None: the embedded database
    node: NodeSettings = field(default_factory=NodeSettings)
    state_dir: Path | None = None  # persisted overrides; None keeps them in memory only


def load_snapshot(
    config_dir: Path,
    generation: int,
    geo: GeoDatabase | None = None,
    node: NodeSettings | None = None,
) -> Snapshot:
    """Read, validate and compile; raises ConfigError. Safe to run in a worker thread."""
    config, warnings = load_config(config_dir)
    return compile_snapshot(
        config, generation, warnings, str(config_dir), time.time(), geo=geo, node=node
    )


class DnsServer:
    def __init__(self, options: ServerOptions, snapshot: Snapshot) -> None:
        self.options = options
        self.holder = SnapshotHolder(snapshot)
        self.store = HealthStore(options.state_dir)
        self.store.set_snapshot(snapshot)
        self.scheduler = ProbeScheduler(self.store)
        self.rng = random.Random()
        self.counters = NetCounters()
        self.reloads_ok = 0
        self.reloads_failed = 0
        self.bound: list[tuple[str, int]] = []
        self._udp: list[asyncio.DatagramTransport] = []
        self._tcp: list[asyncio.Server] = []
        self._tcp_handler = TcpHandler(self.answer, self.counters, options.tcp_limits)

    def answer(self, wire: bytes, client: Client) -> bytes | None:
        return resolve(wire, client, self.holder.current, self.store.view, self.rng, time.time())

    async def start(self) -> None:
        await self.scheduler.start()
        for host, port in self.options.listen:
            self.bound.append(await self._bind(host, port))
        for host, port in self.bound:
            log.info("listening on %s port %d (udp+tcp)", host, port)

    async def _bind(self, host: str, port: int) -> tuple[str, int]:
        """Bind TCP and UDP on the same port; with port 0, find one free for both."""
        loop = asyncio.get_running_loop()
        for _ in range(20):
            tcp = await asyncio.start_server(self._tcp_handler, host, port, reuse_address=True)
            actual = tcp.sockets[0].getsockname()[1]
            try:
                udp, _ = await loop.create_datagram_endpoint(
                    lambda: UdpProtocol(self.answer, self.counters),
                    local_addr=(host, actual),
                    family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                )
            except OSError:
                tcp.close()
                if port:
                    raise
                continue
            self._tcp.append(tcp)
            self._udp.append(udp)  # type: ignore[arg-type]
            return host, actual
        raise OSError(f"no free port for both UDP and TCP on {host}")

    async def reload(self) -> bool:
        """Load the config again; on any error keep serving the old snapshot."""
        generation = self.holder.current.generation + 1
        try:
            current = self.holder.current
            snapshot = await asyncio.to_thread(
                load_snapshot, self.options.config_dir, generation, current.geo, current.node
            )
        except ConfigError as exc:
            self.reloads_failed += 1
            log.error("reload failed, still serving generation %d:", self.holder.current.generation)
            for reason in exc.reasons:
                log.error("  %s", reason)
            return False
        self.holder.swap(snapshot)
        self.store.set_snapshot(snapshot)
        self.scheduler.reconcile()
        self.reloads_ok += 1
        log.info("reloaded %s: generation %d", self.options.config_dir, generation)
        return True

    async def stop(self) -> None:
        await self.scheduler.stop()
        for udp in self._udp:
            udp.close()
        for tcp in self._tcp:
            tcp.close()
        await self._tcp_handler.close_all()
        for tcp in self._tcp:
            await tcp.wait_closed()


async def serve(options: ServerOptions) -> int:
    try:
        geo = GeoDatabase(options.geoip)
    except (OSError, ValueError) as exc:
        log.error("cannot open GeoIP database %s: %s", options.geoip or "(embedded)", exc)
        return 1
    log.info(
        "GeoIP database %s (%s, built %s)",
        geo.path,
        geo.database_type,
        time.strftime("%Y-%m-%d", time.gmtime(geo.build_epoch)),
    )
    try:
        snapshot = await asyncio.to_thread(load_snapshot, options.config_dir, 1, geo, options.node)
    except ConfigError as exc:
        for reason in exc.reasons:
            log.error("%s", reason)
        return 1
    for warning in snapshot.warnings:
        log.warning("%s", warning)
    server = DnsServer(options, snapshot)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(server.reload()))
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    log.info("serving %d zone(s) from %s", len(snapshot.zones), options.config_dir)
    await stop.wait()
    log.info("stopping")
    await server.stop()
    return 0
