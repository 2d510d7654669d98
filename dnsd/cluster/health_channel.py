"""Sharing health between dnsd nodes (docs/health.md "Source regions and quorum") on the bus.

Each node probes as its own source region and publishes every observation — (monitor,
target, source) → state, EWMA RTT, samples, time — to a Redis hash and a pub/sub channel;
every node applies the others' observations, so all compute the same quorum verdict and
the same per-region RTT profiles. Overrides travel the same way (merged entry by entry,
the newer version wins) and each node persists them. A message that is not sealed, names
a target this config does not probe, or is a replay is refused (the bus counts it). An
observation older than `max_age_s` stops counting (a dead node cannot pin a state) — but
only while Redis is reachable: when Redis is down, every node keeps serving on its own
probes and the last shared state it saw, so a Redis outage does not turn into a storm of
answer changes. On reconnect a node re-reads everything and re-publishes its own latest
observations and, if newer, its overrides.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import asdict, dataclass
from typing import Any, get_args

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from dnsd.cluster.bus import RedisBus
from dnsd.cluster.seal import Rejected
from dnsd.health.fsm import State
from dnsd.health.probes import ProbeTarget
from dnsd.health.sources import SourceHealth
from dnsd.health.store import HealthStore

log = logging.getLogger("dnsd.cluster.health")

PREFIX = "dnsd"
OBS_HASH = f"{PREFIX}:observations"
OBS_CHANNEL = f"{PREFIX}:observations"
OVERRIDES_KEY = f"{PREFIX}:overrides"
OVERRIDES_CHANNEL = f"{PREFIX}:overrides"
SCAN_PAGE = 1000  # hash fields read per command on reconnect


@dataclass(frozen=True, slots=True)
class Observation:
    monitor: str
    host: str
    port: int
    source: str
    state: State
    ewma_ms: float | None
    samples: int
    last_at: float
    node: str
    published_at: float

    @property
    def field(self) -> str:
        return f"{self.monitor}|{self.host}|{self.port}|{self.source}"

    @property
    def target(self) -> ProbeTarget:
        return ProbeTarget(self.monitor, self.host, self.port)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Observation:
        """ValueError/TypeError for anything but an observation a node sends."""
        obs = cls(**body)
        if obs.state not in get_args(State):
            raise ValueError(f"unknown state {obs.state!r}")
        numbers = (obs.last_at, obs.published_at, obs.samples, obs.port)
        if not all(isinstance(n, int | float) and math.isfinite(n) for n in numbers):
            raise ValueError("times, samples and port must be numbers")
        if obs.ewma_ms is not None and not (
            isinstance(obs.ewma_ms, int | float) and obs.ewma_ms >= 0
        ):
            raise ValueError("ewma_ms must be a number")
        return obs


def observation_of(
    node: str,
    target: ProbeTarget,
    source: str,
    health: SourceHealth,
    now: float,
    offset: float = 0.0,
) -> Observation:
    """`now`: the cluster's time; `offset`: from the probes' clock to it."""
    rtt = health.rtt
    last = health.state.last
    return Observation(
        monitor=target.monitor,
        host=target.host,
        port=target.port,
        source=source,
        state=health.state.state,
        ewma_ms=rtt.ewma_ms if rtt else None,
        samples=rtt.samples if rtt else 0,
        last_at=last.at + offset if last else now,
        node=node,
        published_at=now,
    )


class HealthChannel:
    channels: tuple[str, ...] = (OBS_CHANNEL, OVERRIDES_CHANNEL)

    def __init__(self, bus: RedisBus, store: HealthStore, max_age_s: float = 30.0) -> None:
        self.bus, self.store = bus, store
        self._own: dict[str, Observation] = {}  # this node's latest, re-sent on reconnect
        store.remote.max_age_s = max_age_s
        # Versions of overrides, publication times and their ageing on the Redis server's
        # clock: nodes whose own clocks disagree still agree on what is newer and how old.
        store.use_clock(bus.now)
        store.observation_listeners.append(self._on_local)
        store.override_listeners.append(self._on_overrides)
        bus.channels.append(self)

    @property
    def node(self) -> str:
        return self.bus.node

    def status(self) -> dict[str, Any]:
        return {}

    def connection(self, up: bool) -> None:
        self.store.remote.frozen = not up  # while Redis is down, remote state does not expire

    async def tick(self, client: aioredis.Redis) -> None:
        self.store.expire_remote()

    async def catch_up(self, client: aioredis.Redis) -> None:
        await self._read_observations(client)
        for obs in list(self._own.values()):  # what we learned while Redis was away
            await self._publish_observation(client, obs)
        stored = await client.get(OVERRIDES_KEY)
        if stored:
            self._receive_overrides(stored)
        if stored is None or self._opened(stored) != self._overrides_body():
            await self._publish_overrides(client, self.store.overrides_document())  # ours is newer

    async def _read_observations(self, client: aioredis.Redis) -> None:
        """The shared hash, a page of SCAN_PAGE fields per command (one HGETALL of a hash
        that whoever can write to Redis filled with junk outlasts the socket timeout, and
        then every reconnect did): each field is opened; what is not sealed by the
        cluster is counted, skipped and deleted, so the next reconnect is fast again."""
        cursor: Any = 0
        page: Any
        while True:
            try:
                cursor, page = await client.hscan(OBS_HASH, cursor, count=SCAN_PAGE)
            except ResponseError as exc:  # an ACL without +hscan: the old way
                log.debug("HSCAN refused (%s): HGETALL", exc)
                cursor, page = 0, await client.hgetall(OBS_HASH)
            junk = []
            for field, raw in dict(page).items():
                try:
                    self.bus.sealer.open(raw)
                except Rejected as exc:
                    self.bus.reject(exc.reason, f"{OBS_HASH} field {str(field)[:80]}: {exc}")
                    junk.append(field)
                    continue
                self._receive_observation(raw)
            if junk:
                try:
                    await client.hdel(OBS_HASH, *junk)
                except ResponseError as exc:  # an ACL without +hdel: skipped every time
                    log.debug("HDEL refused: %s", exc)
            if not cursor:
                return
            await asyncio.sleep(0)  # the DNS loop runs between pages

    def receive(self, channel: str, raw: str | bytes) -> None:
        if channel == OBS_CHANNEL:
            self._receive_observation(raw)
        else:
            self._receive_overrides(raw)

    def _opened(self, raw: str | bytes) -> dict[str, Any] | None:
        try:
            return self.bus.sealer.open(raw)
        except Rejected:
            return None

    def _receive_observation(self, raw: str | bytes) -> None:
        with self.bus.rejections():
            obs = Observation.from_body(self.bus.sealer.open(raw))
            self.bus.check_sender(obs.node, max(obs.published_at, obs.last_at))
            if obs.node == self.node:
                return
            # A sealed message captured from Redis and published again later is genuine but
            # old: each (target, source) is probed by one node, whose observations only move
            # forward in time. An older one is a replay; the same one again changes nothing.
            last = self.store.remote.last_published((obs.target, obs.source))
            if last is not None and obs.published_at <= last:
                if obs.published_at < last:
                    raise Rejected(
                        "replayed",
                        f"an observation of {obs.host}:{obs.port} "
                        f"older than the last one from {obs.source}",
                    )
                return
            if not self.store.apply_remote(
                obs.target,
                obs.source,
                obs.state,
                obs.ewma_ms,
                obs.samples,
                obs.last_at,
                obs.published_at,
            ):
                raise Rejected("unknown_target", f"{obs.host}:{obs.port} is not probed here")

    def _receive_overrides(self, raw: str | bytes) -> None:
        with self.bus.rejections():
            body = self.bus.sealer.open(raw)
            sender = body.get("node")
            if not isinstance(sender, str):
                raise Rejected("malformed", "an override document names no node")
            newest = max(
                (float(v[0]) for v in dict(body.get("versions", {})).values()), default=0.0
            )
            self.bus.check_sender(sender, max(float(body.get("updated_at", 0.0)), newest))
            if sender != self.node:
                self.store.apply_overrides(body)

    def _overrides_body(self) -> dict[str, Any]:
        return {**self.store.overrides_document(), "node": self.node}

    # -- publishing ---------------------------------------------------------------------------
    def _on_local(self, target: ProbeTarget, source: str, health: SourceHealth) -> None:
        obs = observation_of(
            self.node, target, source, health, self.bus.now(), self.bus.clock_offset
        )
        self._own[obs.field] = obs
        client = self.bus.client
        if client is not None:
            asyncio.get_running_loop().create_task(self._publish_observation(client, obs))

    async def _publish_observation(self, client: aioredis.Redis, obs: Observation) -> None:
        try:
            sealed = self.bus.sealer.seal(asdict(obs))
            async with client.pipeline(transaction=False) as pipe:
                pipe.hset(OBS_HASH, obs.field, sealed)
                pipe.publish(OBS_CHANNEL, sealed)
                await pipe.execute()
            self.bus.published_total += 1
        except (RedisError, OSError) as exc:
            self.bus.errors_total += 1
            log.debug("publish failed: %s", exc)

    def _on_overrides(self, doc: dict[str, Any]) -> None:
        client = self.bus.client
        if client is not None:
            asyncio.get_running_loop().create_task(self._publish_overrides(client, doc))

    async def _publish_overrides(self, client: aioredis.Redis, doc: dict[str, Any]) -> None:
        text = self.bus.sealer.seal({**doc, "node": self.node})
        try:
            async with client.pipeline(transaction=False) as pipe:
                pipe.set(OVERRIDES_KEY, text)
                pipe.publish(OVERRIDES_CHANNEL, text)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            self.bus.errors_total += 1
            log.debug("override publish failed: %s", exc)
