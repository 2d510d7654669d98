"""Alerts (`webhooks:` in the server file): events (dnsd.events, the same record the
journal, the log and `GET /api/v1/events` carry) are POSTed as JSON to each webhook that
asked for their kind, with `X-Dnsd-Signature: sha256=HEX`, the HMAC-SHA256 of the body
under the webhook's secret; `format: slack` sends `{"text": ...}` for Slack-compatible
incoming webhooks (its text escaped by Slack's rules: a backend's words can ping nobody nor
disguise a link). A body is the event's JSON with `event` (its kind) and `node`.

Events: `backend_health` (a backend's verdict changed), `quorum` (a backend lost its
quorum of fresh probe sources, the fresh sources took over its verdict, or the quorum is
back), `override`, `failover` (regions of
a load balancer left their first-choice pool: one event listing them), `failback`
(regions back on their first choice), `fail_open` (regions of a load balancer now
answered with nothing healthy: the fallback, or every backend), `pool_health` (a pool
became healthy or unhealthy), `config` (a reload or a config API change),
`reload_failed`, `redis` (the health bus lost or regained Redis), `config_sync` (this
node's config diverged from the cluster's shared history, or is back in step). Each
webhook has its own bounded queue and one sender task: a receiver
that fails is retried after 0.5, 1, 2, 4 s (5 tries), then the event is dropped and
counted; a full queue drops the newest event and counts it. Nothing here waits on a
receiver but the sender task, so a dead receiver never slows answers or probes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import re
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.core import CounterMetricFamily

from dnsd.events import Event
from dnsd.ratelog import RateLimitedLog

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("dnsd.webhooks")
FAILURE_LOG = RateLimitedLog(log)
EVENTS: Final = (
    "backend_health",
    "quorum",
    "pool_health",
    "failover",
    "failback",
    "fail_open",
    "override",
    "config",
    "reload_failed",
    "redis",
    "config_sync",
)
QUEUE_SIZE: Final = 256
TRIES: Final = 5
FIRST_WAIT_S: Final = 0.5
TIMEOUT_S: Final = 5.0
SLACK_TEXT_MAX: Final = 2000  # characters of a Slack message (a probe error can be 8 KiB)
_CONTROLS: Final = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True, slots=True)
class Webhook:
    url: str
    events: frozenset[str]
    secret: bytes
    format: str = "json"  # json | slack


def signature(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class Alerts:
    """The webhooks of one server, their queues and sender tasks."""

    def __init__(self, hooks: tuple[Webhook, ...], node: str) -> None:
        self.hooks = hooks
        self.node = node
        self._queues = [asyncio.Queue[dict[str, Any]](QUEUE_SIZE) for _ in hooks]
        self._tasks: list[asyncio.Task[None]] = []
        self.sent = 0
        self.dropped = 0
        self.failed = 0
        self._started = False

    def start(self) -> None:
        self._started = True
        for hook, queue in zip(self.hooks, self._queues, strict=True):
            self._tasks.append(asyncio.get_running_loop().create_task(self._send_all(hook, queue)))

    def replace(self, hooks: tuple[Webhook, ...]) -> None:
        """Other webhooks (the server file reloaded): events still queued for the old
        ones are dropped with them."""
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        self.hooks = hooks
        self._queues = [asyncio.Queue[dict[str, Any]](QUEUE_SIZE) for _ in hooks]
        if self._started:
            self.start()

    async def stop(self) -> None:
        self._started = False
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def send(self, event: Event) -> None:
        """Queue an event for every webhook that wants its kind (never waits)."""
        wanted = [
            (h, q) for h, q in zip(self.hooks, self._queues, strict=True) if event.kind in h.events
        ]
        if not wanted:
            return
        body = {**event.to_json(), "event": event.kind, "node": self.node}
        for _hook, queue in wanted:
            try:
                queue.put_nowait(body)
            except asyncio.QueueFull:
                self.dropped += 1

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily("dnsd_webhook", "Webhook events", labels=["result"])
        for result, value in (
            ("sent", self.sent),
            ("dropped", self.dropped),
            ("failed", self.failed),
        ):
            family.add_metric([result], value)
        yield family

    async def _send_all(self, hook: Webhook, queue: asyncio.Queue[dict[str, Any]]) -> None:
        import aiohttp  # the HTTP client only where a webhook is configured

        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                event = await queue.get()
                await self._send(session, hook, event)

    async def _send(
        self, session: aiohttp.ClientSession, hook: Webhook, event: dict[str, Any]
    ) -> None:
        import aiohttp

        payload = {"text": slack_text(event)} if hook.format == "slack" else event
        body = json.dumps(payload, sort_keys=True).encode()
        headers = {
            "Content-Type": "application/json",
            "X-Dnsd-Signature": signature(hook.secret, body),
        }
        wait = FIRST_WAIT_S
        for attempt in range(1, TRIES + 1):
            try:
                async with session.post(
                    hook.url, data=body, headers=headers, allow_redirects=False
                ) as response:
                    if response.status < 300:
                        self.sent += 1
                        return
                    problem = f"HTTP {response.status}"
                    if response.status < 400:  # a redirect is not followed
                        problem += " (a redirect: not followed; configure the final URL)"
                        break
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                problem = type(exc).__name__
            if attempt < TRIES:
                await asyncio.sleep(wait)
                wait *= 2
        self.failed += 1
        FAILURE_LOG.log(
            time.time(),
            logging.WARNING,
            "webhook %s: %s event dropped after %d tries (%s)",
            redacted_url(hook.url),
            event["event"],
            attempt,
            problem,
        )


def redacted_url(url: str) -> str:
    """What a log or `dnsd config show` prints of a webhook URL: scheme and host only
    (a Slack or Teams URL's path is its secret)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/…" if parts.path not in ("", "/") else url


def slack_escape(text: str) -> str:
    """Slack's own escaping (api.slack.com/reference/surfaces/formatting): `&`, `<`, `>`
    are control characters there — `<!channel>` pings everyone, `<http://x|y>` shows `y`
    for a link to x. Only those three are escaped; Slack shows `&amp;` `&lt;` `&gt;` as
    the characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_text(event: dict[str, Any]) -> str:
    """The Slack message of an event: its one line with every character escaped — its
    fields (a backend's status line in a probe error, an override's reason, a token's
    name) are not ours, and the line itself has no markup of its own to keep. Line breaks
    and other control characters become one space (a backend could otherwise start a
    line of its own that looks like ours), and the line is bounded."""
    line = _CONTROLS.sub(" ", describe(event))
    if len(line) > SLACK_TEXT_MAX:
        line = line[: SLACK_TEXT_MAX - 1] + "…"
    return slack_escape(line)


def describe(event: dict[str, Any]) -> str:
    """One line for people (the Slack format)."""
    kind, node = event["event"], event["node"]
    why = f" — {event.get('cause')} (by {event.get('actor')})"
    if kind in ("failover", "failback", "fail_open"):
        moves = ", ".join(
            f"{region}: {c['from']} -> {c['to']}" for region, c in event["changes"].items()
        )
        return f"dnsd {node}: {kind} of {event['lb']} ({moves}){why}"
    about = next((f"{k} {event[k]}" for k in ("backend", "pool", "lb") if event.get(k)), "")
    if event.get("backend"):
        about = f"backend {event['pool']}/{event['backend']}"
    change = f": {event['old']} -> {event['new']}" if "old" in event and "new" in event else ""
    return f"dnsd {node}: {kind} {about}{change}{why}".replace("  ", " ")
