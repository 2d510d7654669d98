"""Sharing health between dnsd nodes through Redis (docs/health.md, source regions and quorum).

Each node probes as its own source region and publishes every observation — (monitor,
target, source) → state, EWMA RTT, samples, time — to a Redis hash and a pub/sub channel;
every node applies the others' observations, so all compute the same quorum verdict and
the same per-region RTT profiles. Overrides travel the same way (merged entry by entry,
the newer version wins) and each node persists them. Every message is sealed with the
cluster key (`seal.py`); one that is not — or names a node outside `--cluster-nodes`, a
target this config does not probe, or a time in the future — is counted by reason in
`dnsd_redis_rejected_total`, logged at a bounded rate and skipped. An observation older than `max_age_s` stops counting (a dead node
cannot pin a state) — but only while Redis is reachable: when Redis is down, every node
keeps serving on its own probes and the last shared state it saw, so a Redis outage does
not turn into a storm of answer changes. On reconnect a node re-reads everything and
re-publishes its own latest observations and, if newer, its overrides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, Protocol, get_args

import redis.asyncio as aioredis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from redis.exceptions import RedisError

from dnsd.health.fsm import State
from dnsd.health.probes import ProbeTarget
from dnsd.health.seal import Rejected, Sealer
from dnsd.health.store import HealthStore, PersistError, SourceHealth
from dnsd.ratelog import RateLimitedLog

log = logging.getLogger("dnsd.health.bus")
REJECTED_LOG = RateLimitedLog(log)
ERROR_LOG = RateLimitedLog(log)  # unexpected client errors while reconnecting

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


def redacted(url: str) -> str:
    """The URL without its password (redis://user:PASSWORD@host → redis://user:***@host)."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"


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


MAX_SKEW_S = 5.0  # a message's times may be this far ahead of our clock, no further
SILENT_S = 5.0  # a subscription this long without a message is pinged; as long again: dead
MAX_MESSAGE = 4 * 1024 * 1024  # bytes; a larger message is refused before it is opened


class BusChannel(Protocol):
    """One more kind of message on the bus's connection (the config sync, dnsd.provision):
    the bus subscribes to `channel`, hands it every message, and lets it catch up after
    each (re)connect."""

    channel: str

    async def catch_up(self, client: aioredis.Redis) -> None: ...

    def receive(self, raw: str | bytes) -> None: ...

    def status(self) -> dict[str, Any]: ...


class RedisBus:
    def __init__(
        self,
        url: str,
        node: str,
        store: HealthStore,
        max_age_s: float = 30.0,
        key: bytes | None = None,
        nodes: frozenset[str] | None = None,
    ) -> None:
        """`key`: the cluster key (None only with --redis-insecure); `nodes`: the node
        names messages may come from (None: any)."""
        self.url, self.node, self.store = url, node, store
        self.max_age_s = max_age_s
        self.sealer = Sealer(key)
        self.nodes = nodes
        self.connected = False
        self.connection_listeners: list[Callable[[bool], None]] = []  # lost / regained
        self._ever_connected = False
        self.errors_total = 0
        self.published_total = 0
        self.received_total = 0
        self.rejected: dict[str, int] = {}
        self._own: dict[str, Observation] = {}  # this node's latest, re-sent on reconnect
        self._client: aioredis.Redis | None = None
        self._pubsub: Any = None  # the subscription of the current connection
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.channels: list[BusChannel] = []
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
                    self.url,
                    socket_timeout=2,
                    socket_connect_timeout=2,
                )
                await self._client.ping()
                pubsub = self._pubsub = self._client.pubsub()
                await pubsub.subscribe(
                    OBS_CHANNEL, OVERRIDES_CHANNEL, *(c.channel for c in self.channels)
                )
                await self._catch_up()
                for extra in self.channels:
                    await extra.catch_up(self._client)
                self._set_connected(True)
                backoff = 0.2
                await self._listen(pubsub)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # whatever the client raises: reconnect, since
                # this loop is the node's only link to the cluster and must never end.
                self.errors_total += 1
                if self.connected:
                    log.error(
                        "redis %s unreachable (%s: %s): serving on own probes and last shared"
                        " state", redacted(self.url), type(exc).__name__, exc,
                    )  # fmt: skip
                elif not isinstance(exc, (RedisError, OSError)):
                    ERROR_LOG.log(time.time(), logging.ERROR, "redis %s: %s: %s", redacted(self.url),
                                  type(exc).__name__, str(exc)[:200])  # fmt: skip
                self._set_connected(False)
                for closing in (self._pubsub, self._client):
                    if closing is not None:
                        with contextlib.suppress(Exception):
                            await asyncio.wait_for(closing.aclose(), 2.0)
                self._pubsub = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def _listen(self, pubsub: Any) -> None:
        """Hand each message on; raise ConnectionError when the subscription has gone
        silent: nothing (not even our own observations) for SILENT_S, and no answer to a
        PING within SILENT_S more. A connection can die without closing (a dropped route,
        a frozen peer) and the client then only ever returns "no message"."""
        heard, pinged = time.monotonic(), False
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            now = time.monotonic()
            if message is not None:
                heard, pinged = now, False
                if message.get("type") in ("message", "pmessage"):
                    self._on_message(message)
            elif now - heard > SILENT_S:
                if pinged:
                    raise ConnectionError(f"the subscription went silent for {2 * SILENT_S:.0f} s")
                await pubsub.ping()
                heard, pinged = now, True

    def status(self) -> dict[str, Any]:
        out = {"url": redacted(self.url), "node": self.node, "connected": self.connected,
               "authenticated": self.sealer.authenticated, "rejected": dict(self.rejected)}  # fmt: skip
        for extra in self.channels:
            out.update(extra.status())
        return out

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
        rejected = CounterMetricFamily(
            "dnsd_redis_rejected", "Bus messages refused and skipped", labels=["reason"]
        )
        for reason, count in sorted(self.rejected.items()):
            rejected.add_metric([reason], count)
        yield rejected

    def _set_connected(self, up: bool) -> None:
        if up and not self.connected:
            log.warning(
                "redis %s connected: sharing health as node %s", redacted(self.url), self.node
            )
        if up != self.connected and (not up or self._ever_connected):  # lost, or regained
            for listener in self.connection_listeners:
                listener(up)
        self._ever_connected = self._ever_connected or up
        self.connected = up
        self.store.remote.frozen = not up  # while Redis is down, remote state does not expire

    async def _catch_up(self) -> None:
        assert self._client is not None
        observations: dict[Any, Any] = await self._client.hgetall(OBS_HASH)
        for raw in observations.values():
            self._receive_observation(raw)
        for obs in list(self._own.values()):  # what we learned while Redis was away
            await self._publish_observation(obs)
        stored = await self._client.get(OVERRIDES_KEY)
        if stored:
            self._receive_overrides(stored)
        if stored is None or self._opened(stored) != self._overrides_body():
            await self._publish_overrides(self.store.overrides_document())  # ours is newer

    def _on_message(self, message: dict[str, Any]) -> None:
        channel = message["channel"]
        channel = channel.decode() if isinstance(channel, bytes) else channel
        self.received_total += 1
        if channel == OBS_CHANNEL:
            self._receive_observation(message["data"])
        elif channel == OVERRIDES_CHANNEL:
            self._receive_overrides(message["data"])
        else:
            for extra in self.channels:
                if channel == extra.channel:
                    extra.receive(message["data"])

    @property
    def client(self) -> aioredis.Redis | None:
        """The connection while Redis is reachable."""
        return self._client if self.connected else None

    def open_message(self, raw: str | bytes, newest: str = "at") -> dict[str, Any]:
        """A sealed message from a node of this cluster, opened: Rejected otherwise (a
        bad seal, a node outside --cluster-nodes, a time in the future, too large)."""
        if len(raw) > MAX_MESSAGE:
            raise Rejected("malformed", f"a message of {len(raw)} bytes")
        body = self.sealer.open(raw)
        sender = body.get("node")
        if not isinstance(sender, str):
            raise Rejected("malformed", "a message that names no node")
        self._check_sender(sender, float(body.get(newest, 0.0)))
        return body

    def _opened(self, raw: str | bytes) -> dict[str, Any] | None:
        try:
            return self.sealer.open(raw)
        except Rejected:
            return None

    def _receive_observation(self, raw: str | bytes) -> None:
        with self.rejections():
            obs = Observation.from_body(self.sealer.open(raw))
            self._check_sender(obs.node, max(obs.published_at, obs.last_at))
            if obs.node == self.node:
                return
            # A sealed message captured from Redis and published again later is genuine but
            # old: each (target, source) is probed by one node, whose observations only move
            # forward in time. An older one is a replay; the same one again changes nothing.
            last = self.store.remote.last_published((obs.target, obs.source))
            if last is not None and obs.published_at <= last:
                if obs.published_at < last:
                    raise Rejected("replayed", f"an observation of {obs.host}:{obs.port} "
                                   f"older than the last one from {obs.source}")  # fmt: skip
                return
            if not self.store.apply_remote(
                obs.target, obs.source, obs.state, obs.ewma_ms, obs.samples, obs.last_at,
                obs.published_at,
            ):  # fmt: skip
                raise Rejected("unknown_target", f"{obs.host}:{obs.port} is not probed here")

    def _receive_overrides(self, raw: str | bytes) -> None:
        with self.rejections():
            body = self.sealer.open(raw)
            sender = body.get("node")
            if not isinstance(sender, str):
                raise Rejected("malformed", "an override document names no node")
            newest = max(
                (float(v[0]) for v in dict(body.get("versions", {})).values()), default=0.0
            )
            self._check_sender(sender, max(float(body.get("updated_at", 0.0)), newest))
            if sender != self.node:
                self.store.apply_overrides(body)

    def _check_sender(self, node: str, newest: float) -> None:
        if self.nodes is not None and node not in self.nodes:
            raise Rejected("node", f"node {str(node)[:64]!r} is not in --cluster-nodes")
        if not math.isfinite(newest) or newest > time.time() + MAX_SKEW_S:
            raise Rejected("future", "a time more than 5 s ahead of this node's clock")

    def _overrides_body(self) -> dict[str, Any]:
        return {**self.store.overrides_document(), "node": self.node}

    @contextlib.contextmanager
    def rejections(self) -> Iterator[None]:
        """A message this cluster did not send, or cannot use, is counted by reason and
        skipped — never applied, never the end of the subscriber — and logged at a bounded
        rate."""
        try:
            yield
        except PersistError as exc:  # ours, not the message's: the next document retries
            REJECTED_LOG.log(time.time(), logging.ERROR, "shared overrides not applied: %s", exc)
        except Rejected as exc:
            self._reject(exc.reason, str(exc))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            self._reject("malformed", f"{type(exc).__name__}: {str(exc)[:200]}")

    def _reject(self, reason: str, detail: str) -> None:
        self.errors_total += 1
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        REJECTED_LOG.log(time.time(), logging.ERROR, "health bus message refused (%s): %s",
                         reason, detail)  # fmt: skip

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
            sealed = self.sealer.seal(asdict(obs))
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.hset(OBS_HASH, obs.field, sealed)
                pipe.publish(OBS_CHANNEL, sealed)
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
        text = self.sealer.seal({**doc, "node": self.node})
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
