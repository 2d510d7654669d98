"""The cluster's link to Redis: one connection loop that every channel rides on.

The bus connects (a plain server, TLS, an ACL user or a Sentinel-managed primary:
`connection.py`), subscribes to every channel's pub/sub names, lets each channel catch up,
hands it its messages and, once a second, a turn to check the shared state (`tick`). Any
error — a lost connection, a silent subscription, a primary that Sentinel says has moved —
ends the connection; the loop reconnects with backoff, asks Sentinel again, re-subscribes
and lets every channel catch up again, so health sharing and config sync resume by
themselves. Every message is sealed with the cluster key (`seal.py`); what is not, or names
a node outside `--cluster-nodes`, or a time in the future, is counted by reason in
`dnsd_redis_rejected_total`, logged at a bounded rate and skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import redis.asyncio as aioredis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from redis.exceptions import RedisError, ResponseError

from dnsd.cluster.connection import RedisTarget
from dnsd.cluster.seal import Rejected, RejectReason, Sealer
from dnsd.health.store import PersistError
from dnsd.ratelog import RateLimitedLog

log = logging.getLogger("dnsd.cluster.bus")
REJECTED_LOG = RateLimitedLog(log)
ERROR_LOG = RateLimitedLog(log)  # unexpected client errors while reconnecting

MAX_SKEW_S = 5.0  # a message's times may be this far ahead of our clock, no further
SILENT_S = 5.0  # a subscription this long without a message is pinged; as long again: dead
TICK_S = 1.0  # how often each channel checks the shared state while connected
MAX_MESSAGE = 4 * 1024 * 1024  # bytes; a larger message is refused before it is opened


class Channel(Protocol):
    """One kind of shared state on the bus (health, config)."""

    @property
    def channels(self) -> tuple[str, ...]: ...  # the pub/sub names it listens to

    async def catch_up(self, client: aioredis.Redis) -> None: ...

    def receive(self, channel: str, raw: str | bytes) -> None: ...

    async def tick(self, client: aioredis.Redis) -> None: ...

    def connection(self, up: bool) -> None: ...

    def status(self) -> dict[str, Any]: ...


def describe(exc: BaseException) -> str:
    """An error an operator can act on (a TLS failure names the certificate problem)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS: the server's certificate was refused ({cause.verify_message})"
        if isinstance(cause, ssl.SSLError):
            return f"TLS: {cause.reason or cause}"
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    if "certificate verify failed" in text:
        return f"TLS: the server's certificate was refused ({text[:200]})"
    return f"{type(exc).__name__}: {text[:200]}"


class RedisBus:
    def __init__(
        self,
        target: RedisTarget,
        node: str,
        key: bytes | None = None,
        nodes: frozenset[str] | None = None,
    ) -> None:
        """`key`: the cluster key (None only with --redis-insecure); `nodes`: the node
        names messages may come from (None: any)."""
        self.target, self.node = target, node
        self.sealer = Sealer(key)
        self.nodes = nodes
        self.connected = False
        self.connection_listeners: list[Callable[[bool], None]] = []  # lost / regained
        self._ever_connected = False
        self.errors_total = 0
        self.published_total = 0
        self.received_total = 0
        self.failovers_total = 0  # reconnects that Sentinel sent to another primary
        self.last_error: str | None = None
        self.primary: tuple[str, int] | None = None  # with Sentinel: where we are connected
        self.rejected: dict[str, int] = {}
        self.clock_offset = 0.0  # the Redis server's clock minus ours (`now`)
        self._last_now = 0.0
        self._client: aioredis.Redis | None = None
        self._sentinel: Any = None
        self._pubsub: Any = None  # the subscription of the current connection
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.channels: list[Channel] = []

    @property
    def url(self) -> str:
        return str(self.target)  # redacted

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._run(), name="redis bus"))

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._close()

    async def _close(self) -> None:
        for closing in (self._pubsub, self._client, self._sentinel):
            if closing is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closing.aclose(), 2.0)
        self._pubsub = self._client = self._sentinel = None

    # -- the connection loop ------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = 0.2
        while not self._stopping:
            try:
                self._client, self._sentinel = self.target.connect()
                await self._client.ping()
                await self._read_clock(self._client)
                pubsub = self._pubsub = self._client.pubsub()
                await pubsub.subscribe(*(name for c in self.channels for name in c.channels))
                connection = pubsub.connection
                if self._sentinel is not None and connection is not None:
                    self._on_primary((str(connection.host), int(connection.port)))
                for channel in self.channels:
                    await channel.catch_up(self._client)
                self.last_error = None
                self._set_connected(True)
                backoff = 0.2
                await self._listen(pubsub)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # whatever the client raises: reconnect, since
                # this loop is the node's only link to the cluster and must never end.
                self.errors_total += 1
                first = self.last_error is None
                self.last_error = describe(exc)
                if self.connected:
                    log.error(
                        "redis %s unreachable (%s): serving on own probes and last shared state",
                        self.url,
                        self.last_error,
                    )
                elif first or not isinstance(exc, (RedisError, OSError)):
                    ERROR_LOG.log(
                        time.time(), logging.ERROR, "redis %s: %s", self.url, self.last_error
                    )
                self._set_connected(False)
                await self._close()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def _listen(self, pubsub: Any) -> None:
        """Hand each message on; raise ConnectionError when the subscription has gone
        silent: nothing (not even our own observations) for SILENT_S, and no answer to a
        PING within SILENT_S more. A connection can die without closing (a dropped route,
        a frozen peer) and the client then only ever returns "no message"."""
        heard, pinged = time.monotonic(), False
        next_tick = time.monotonic() + TICK_S
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=TICK_S)
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
            if now >= next_tick:
                next_tick = now + TICK_S
                await self._tick()

    async def _read_clock(self, client: aioredis.Redis) -> None:
        """How far the Redis server's clock is from ours. Nodes' clocks may disagree by
        any amount; they all share the one of their Redis, so what is "too far in the
        future" is judged on that clock, never on this node's own."""
        try:
            before = time.time()
            seconds, micros = await client.time()
            after = time.time()
        except ResponseError as exc:  # an ACL without +time: our own clock, as before
            ERROR_LOG.log(
                time.time(),
                logging.WARNING,
                "redis %s: TIME refused (%s): judging times on this node's clock",
                self.url,
                exc,
            )
            return
        self.clock_offset = seconds + micros / 1e6 - (before + after) / 2

    def now(self) -> float:
        """The cluster's time: the Redis server's clock as last measured, never backwards."""
        self._last_now = max(self._last_now, time.time() + self.clock_offset)
        return self._last_now

    async def _tick(self) -> None:
        assert self._client is not None
        await self._read_clock(self._client)
        if self._sentinel is not None:
            # A demoted primary that stays up keeps our subscription open: ask Sentinel.
            primary = await self.target.primary(self._sentinel)
            if primary != self.primary:  # counted once connected there (_on_primary)
                log.warning(
                    "redis %s: the primary moved from %s to %s: reconnecting",
                    self.url,
                    self.primary,
                    primary,
                )
                raise ConnectionError("the primary moved")
        for channel in self.channels:
            await channel.tick(self._client)

    def _on_primary(self, primary: tuple[str, int]) -> None:
        """Connected to the primary Sentinel names. A move is counted here, however it was
        noticed: a demoted primary found by asking Sentinel (`_tick`), or — the usual case,
        a primary that died — a lost connection whose reconnect Sentinel sent elsewhere."""
        if self.primary is not None and primary != self.primary:
            self.failovers_total += 1
            log.warning(
                "redis %s: failover: the primary is now %s:%d (was %s:%d)",
                self.url,
                *primary,
                *self.primary,
            )
        self.primary = primary

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "url": self.url,
            "node": self.node,
            "connected": self.connected,
            "authenticated": self.sealer.authenticated,
            "rejected": dict(self.rejected),
            "tls": self.target.tls,
            "error": self.last_error,
        }
        if self.target.sentinel:
            out["primary"] = f"{self.primary[0]}:{self.primary[1]}" if self.primary else None
        for channel in self.channels:
            out.update(channel.status())
        return out

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """Its Prometheus collector (Metrics.register)."""
        up = GaugeMetricFamily("dnsd_redis_connected", "1 while the Redis health bus is reachable")
        up.add_metric([], 1.0 if self.connected else 0.0)
        yield up
        errors = CounterMetricFamily("dnsd_redis_errors", "Redis errors (connection or command)")
        errors.add_metric([], self.errors_total)
        yield errors
        moved = CounterMetricFamily(
            "dnsd_redis_failovers", "Connections moved to a new primary named by Sentinel"
        )
        moved.add_metric([], self.failovers_total)
        yield moved
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
        for channel in self.channels:
            extra = getattr(channel, "collect", None)
            if extra is not None:
                yield from extra()

    def _set_connected(self, up: bool) -> None:
        if up and not self.connected:
            log.warning(
                "redis %s connected: sharing health as node %s%s",
                self.url,
                self.node,
                f" (primary {self.primary[0]}:{self.primary[1]})" if self.primary else "",
            )
        if up != self.connected and (not up or self._ever_connected):  # lost, or regained
            for listener in self.connection_listeners:
                listener(up)
        self._ever_connected = self._ever_connected or up
        self.connected = up
        for channel in self.channels:
            channel.connection(up)

    def _on_message(self, message: dict[str, Any]) -> None:
        channel = message["channel"]
        channel = channel.decode() if isinstance(channel, bytes) else channel
        self.received_total += 1
        for extra in self.channels:
            if channel in extra.channels:
                extra.receive(channel, message["data"])

    @property
    def client(self) -> aioredis.Redis | None:
        """The connection while Redis is reachable."""
        return self._client if self.connected else None

    def open_message(self, raw: str | bytes, newest: str | None = "at") -> dict[str, Any]:
        """A sealed message from a node of this cluster, opened: Rejected otherwise (a
        bad seal, a node outside --cluster-nodes, a time in the future, too large).
        `newest`: the field whose time may not be in the future (None: no time check)."""
        if len(raw) > MAX_MESSAGE:
            raise Rejected("malformed", f"a message of {len(raw)} bytes")
        body = self.sealer.open(raw)
        sender = body.get("node")
        if not isinstance(sender, str):
            raise Rejected("malformed", "a message that names no node")
        self.check_sender(sender, None if newest is None else float(body.get(newest, 0.0)))
        return body

    def check_sender(self, node: str, newest: float | None) -> None:
        if self.nodes is not None and node not in self.nodes:
            raise Rejected("node", f"node {str(node)[:64]!r} is not in --cluster-nodes")
        if newest is not None and (not math.isfinite(newest) or newest > self.now() + MAX_SKEW_S):
            raise Rejected("future", "a time more than 5 s ahead of the Redis server's clock")

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
            self.reject(exc.reason, str(exc))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            self.reject("malformed", f"{type(exc).__name__}: {str(exc)[:200]}")

    def reject(self, reason: RejectReason, detail: str) -> None:
        self.errors_total += 1
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        REJECTED_LOG.log(
            time.time(), logging.ERROR, "cluster message refused (%s): %s", reason, detail
        )
