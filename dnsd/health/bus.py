"""Sharing health between dnsd nodes through Redis (health.md "Source regions and quorum").

Each node probes as its own source region and publishes every observation — (monitor,
target, source) → state, EWMA RTT, samples, time — to a Redis hash and a pub/sub channel;
every node applies the others' observations, so all compute the same quorum verdict and
the same per-region RTT profiles. Overrides travel the same way (newest wins) and each
node persists them. An observation older than `max_age_s` stops counting (a dead node
cannot pin a state) — but only while Redis is reachable: when Redis is down, every node
keeps serving on its own probes and the last shared state it saw, so a Redis outage does
not turn into a storm of answer changes. On reconnect a node re-reads everything and
re-publishes its own latest observations and, if newer, its overrides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, get_args

import redis.asyncio as aioredis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from redis.exceptions import RedisError

from dnsd.health.fsm import State
from dnsd.health.probes import ProbeTarget
from dnsd.health.store import HealthStore, PersistError, SourceHealth
from dnsd.ratelog import RateLimitedLog

log = logging.getLogger("dnsd.health.bus")
REJECTED_LOG = RateLimitedLog(log)

PREFIX = "dnsd"
OBS_HASH = f"{PREFIX}:observations"
OBS_CHANNEL = f"{PREFIX}:observations"
OVERRIDES_KEY = f"{PREFIX}:overrides"
OVERRIDES_CHANNEL = f"{PREFIX}:overrides"


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

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> Observation:
        """ValueError/TypeError for anything but an observation another node sent."""
        obs = cls(**json.loads(text))
        if obs.state not in get_args(State):
            raise ValueError(f"unknown state {obs.state!r}")
        return obs


def observation_of(
    node: str, target: ProbeTarget, source: str, health: SourceHealth, now: float
) -> Observation:
    rtt = health.rtt
    last = health.state.last
    return Observation(
        monitor=target.monitor, host=target.host, port=target.port, source=source,
        state=health.state.state, ewma_ms=rtt.ewma_ms if rtt else None,
        samples=rtt.samples if rtt else 0, last_at=last.at if last else now,
        node=node, published_at=now,
    )  # fmt: skip


class RedisBus:
    def __init__(self, url: str, node: str, store: HealthStore, max_age_s: float = 30.0) -> None:
        self.url, self.node, self.store = url, node, store
        self.max_age_s = max_age_s
        self.connected = False
        self.errors_total = 0
        self.published_total = 0
        self.received_total = 0
        self.malformed_total = 0
        self._own: dict[str, Observation] = {}  # this node's latest, re-sent on reconnect
        self._client: aioredis.Redis | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        store.remote.max_age_s = max_age_s
        store.observation_listeners.append(self._on_local)
        store.override_listeners.append(self._on_overrides)

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._run(), name="redis bus"))
        self._tasks.append(asyncio.create_task(self._expire_loop(), name="redis bus expiry"))

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    # -- the connection loop ------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = 0.2
        while not self._stopping:
            try:
                self._client = aioredis.from_url(
                    self.url, socket_timeout=2, socket_connect_timeout=2
                )
                await self._client.ping()
                pubsub = self._client.pubsub()
                await pubsub.subscribe(OBS_CHANNEL, OVERRIDES_CHANNEL)
                await self._catch_up()
                self._set_connected(True)
                backoff = 0.2
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None:
                        self._on_message(message)
            except (RedisError, OSError) as exc:
                self.errors_total += 1
                if self.connected:
                    log.error(
                        "redis %s unreachable (%s): serving on own probes and last shared state",
                        self.url,
                        exc,
                    )
                self._set_connected(False)
                if self._client is not None:
                    with contextlib.suppress(RedisError, OSError):
                        await self._client.aclose()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def status(self) -> dict[str, Any]:
        return {"url": self.url, "node": self.node, "connected": self.connected}

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """Its Prometheus collector (Metrics.register)."""
        up = GaugeMetricFamily("dnsd_redis_connected", "1 while the Redis health bus is reachable")
        up.add_metric([], 1.0 if self.connected else 0.0)
        yield up
        errors = CounterMetricFamily("dnsd_redis_errors", "Redis errors (connection or command)")
        errors.add_metric([], self.errors_total)
        yield errors
        messages = CounterMetricFamily(
            "dnsd_redis_messages", "Health bus messages", labels=["direction"]
        )
        messages.add_metric(["published"], self.published_total)
        messages.add_metric(["received"], self.received_total)
        yield messages

    def _set_connected(self, up: bool) -> None:
        if up and not self.connected:
            log.warning("redis %s connected: sharing health as node %s", self.url, self.node)
        self.connected = up
        self.store.remote.frozen = not up  # while Redis is down, remote state does not expire

    async def _catch_up(self) -> None:
        assert self._client is not None
        observations: dict[Any, Any] = await self._client.hgetall(OBS_HASH)
        for raw in observations.values():
            with self._malformed_ignored():
                self._apply(Observation.from_json(raw))
        for obs in list(self._own.values()):  # what we learned while Redis was away
            await self._publish_observation(obs)
        stored = await self._client.get(OVERRIDES_KEY)
        shared: Any = None
        with self._malformed_ignored():
            shared = json.loads(stored) if stored else None
            local = self.store.overrides_document()
            if isinstance(shared, dict) and shared.get("updated_at", 0) > local["updated_at"]:
                self.store.apply_overrides(shared)
                return
        local = self.store.overrides_document()
        if local["updated_at"] > (shared.get("updated_at", 0) if isinstance(shared, dict) else 0):
            await self._publish_overrides(local)

    def _on_message(self, message: dict[str, Any]) -> None:
        channel = (
            message["channel"].decode()
            if isinstance(message["channel"], bytes)
            else message["channel"]
        )
        self.received_total += 1
        with self._malformed_ignored():
            if channel == OBS_CHANNEL:
                self._apply(Observation.from_json(message["data"]))
            elif channel == OVERRIDES_CHANNEL:
                doc = json.loads(message["data"])
                newer = doc.get("updated_at", 0) > self.store.overrides_document()["updated_at"]
                if doc.get("node") != self.node and newer:
                    self.store.apply_overrides(doc)

    @contextlib.contextmanager
    def _malformed_ignored(self) -> Iterator[None]:
        """A message that is not what a dnsd node sends is counted and skipped, never
        applied, and logged at a bounded rate."""
        try:
            yield
        except PersistError as exc:  # ours, not the message's: the next newer document retries
            REJECTED_LOG.log(time.time(), logging.ERROR, "shared overrides not applied: %s", exc)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            self.errors_total += 1
            self.malformed_total += 1
            REJECTED_LOG.log(time.time(), logging.ERROR,
                             "ignored a malformed health bus message: %s", str(exc)[:200])  # fmt: skip

    def _apply(self, obs: Observation) -> None:
        if obs.node != self.node:
            self.store.apply_remote(
                obs.target,
                obs.source,
                obs.state,
                obs.ewma_ms,
                obs.samples,
                obs.last_at,
                obs.published_at,
            )

    # -- publishing ---------------------------------------------------------------------------
    def _on_local(self, target: ProbeTarget, source: str, health: SourceHealth) -> None:
        obs = observation_of(self.node, target, source, health, time.time())
        self._own[obs.field] = obs
        if self.connected:
            asyncio.get_running_loop().create_task(self._publish_observation(obs))

    async def _publish_observation(self, obs: Observation) -> None:
        if self._client is None:
            return
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.hset(OBS_HASH, obs.field, obs.to_json())
                pipe.publish(OBS_CHANNEL, obs.to_json())
                await pipe.execute()
            self.published_total += 1
        except (RedisError, OSError) as exc:
            self.errors_total += 1
            log.debug("publish failed: %s", exc)

    def _on_overrides(self, doc: dict[str, Any]) -> None:
        if self.connected:
            asyncio.get_running_loop().create_task(self._publish_overrides(doc))

    async def _publish_overrides(self, doc: dict[str, Any]) -> None:
        if self._client is None:
            return
        text = json.dumps({**doc, "node": self.node})
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.set(OVERRIDES_KEY, text)
                pipe.publish(OVERRIDES_CHANNEL, text)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            self.errors_total += 1
            log.debug("override publish failed: %s", exc)

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.store.expire_remote()
