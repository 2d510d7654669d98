"""The admin server's door: bounded connections, headers on time, no client can jam it.

aiohttp holds a connection that never sends a request for ever, and a connection that
pipelines requests but never reads the answers for as long as the client likes (its
handler waits on a full socket). `ConnectionGuard` wraps aiohttp's protocol factory and
does its accounting when a connection is accepted:

* **headers on time**: a connection finishes its first request's headers within
  `header_timeout_s` (then aiohttp's keep-alive timeout governs it);
* **requests on time**: from a client without a valid token, a request that has begun
  (a later request's headers, or any request's body) arrives whole within
  `request_timeout_s`, else the connection is cut and counted; while its body is under way
  it may lose its place (no request without a token needs a body, and with a minimum age
  200 trickling clients that reconnect at once would keep every place young), and so may
  one whose later headers have been arriving for over a second;
* **writes on time**: a client that stops reading its answers (the server's socket buffer
  stays full, asyncio pauses writing) is cut after `write_timeout_s` without progress, and
  nothing more is read from it meanwhile — what one connection may queue is its socket
  buffers (the send buffer set to `SEND_BUFFER`, so a client that reads nothing stops costing
  work after a few answers) plus aiohttp's bounded queue of pipelined requests;
* **per source**: at most `per_source` connections from one address (an IPv6 /64), and
  `rate_per_source` requests a second from it without a valid token (a burst of three
  seconds' worth): what a connection sends beyond that is held (at most `MAX_HELD`), and
  nothing more is read from it, until the budget has refilled — closing it would only
  make the client reconnect at once;
* **in all**: at most `max_connections`; a new connection takes the place of one of the
  source holding the most (when that source holds more than the newcomer's: one that does
  not read, or has no headers yet, else its newest), else of one still without headers or
  whose client does not read, or whose request is unfinished (as above); at its source's
  cap it may take the place of its own source's connection that does not read or has sent
  no headers for `HEADERS_GRACE_S` (or an unfinished request). Connections that showed a valid token are never taken;
* **a reserve for operators**: a connection that finds no room (its source is at its cap,
  or every place is kept) may still wait in one of `reserve` places for its first request
  headers; with a valid `Authorization: Bearer` token it is served, without one it gets a
  503 and is closed (when the reserve is full, the oldest one without headers yet makes
  room — of the newcomer's own source when that source holds a quarter of the reserve).
  So an operator with a token gets in, whatever a client without one does.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from dnsd.admin.request_framing import HEADER_END, MAX_HEAD, RequestFraming

SLOW_HEADERS_S = 1.0  # a connection this long without headers may lose its place
HEADERS_GRACE_S = 0.25  # to its own source's newcomer (younger: maybe a request on its way)
SEND_BUFFER = 64 * 1024  # the kernel's send buffer per connection (it would grow to 4 MB)
MAX_SOURCES = 10_000  # request budgets kept (the least recently used go first)
MAX_HELD = 1 << 20  # bytes a client over its budget may have sent on (then it is cut)
MAX_QUEUED = 256  # pipelined requests one connection may have waiting (aiohttp caps at 32)


def source_key(peer: Any) -> str:
    """What the per-source cap counts by: the address, or the /64 of an IPv6 one."""
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return str(host)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def bearer_token(head: bytes) -> str | None:
    """The credentials of the first `Authorization: Bearer` header in a request head."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            scheme, _, credentials = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and credentials.strip():
                return credentials.strip().decode("latin-1")
            return None
    return None


def refusal(status: int, message: str) -> bytes:
    """A whole HTTP answer that closes the connection (503 or 429), written by the guard
    itself: aiohttp never sees such a request."""
    body = json.dumps({"error": message}).encode()
    reason = b"Too Many Requests" if status == 429 else b"Service Unavailable"
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (status, reason, len(body), body)
    )


class ConnectionGuard:
    def __init__(
        self,
        factory: Callable[[], asyncio.Protocol],
        max_connections: int,
        header_timeout_s: float,
        *,
        reserve: int = 0,
        per_source: int | None = None,
        write_timeout_s: float = 5.0,
        request_timeout_s: float = 10.0,
        authorized: Callable[[str], bool] = lambda token: False,
        rate_per_source: float = 0.0,
    ) -> None:
        self.factory = factory
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.reserve = reserve
        self.per_source = per_source or max_connections
        self.write_timeout_s = write_timeout_s
        self.request_timeout_s = request_timeout_s
        self.authorized = authorized
        self.open: dict[GuardedProtocol, None] = {}  # insertion order: oldest first
        self.reserved: dict[GuardedProtocol, None] = {}
        self.by_source: dict[str, int] = {}
        self.refused = 0
        self.timed_out = 0
        self.write_timeouts = 0
        self.request_timeouts = 0  # requests whose headers or body did not arrive in time
        self.evicted = 0
        self.busy = 0  # reserve connections without a valid token (503)
        self.throttled = 0  # times a connection was held back for its source's request rate
        self.rate_per_source = rate_per_source
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()  # source → [tokens, at]

    def __call__(self) -> GuardedProtocol:
        return GuardedProtocol(self, self.factory())

    def admit(self, new: GuardedProtocol) -> bool:
        """Place a new connection: in the open pool, in the reserve (judged on its headers),
        or nowhere (False: closed at once)."""
        mine = self.by_source.get(new.source, 0)
        if mine >= self.per_source:
            room = self._evict(self._own_victim(new.source))
        else:
            room = len(self.open) < self.max_connections or self._evict(self._victim(mine))
        if room:
            self.open[new] = None
            self.by_source[new.source] = self.by_source.get(new.source, 0) + 1  # after evictions
            return True
        if self.reserve and len(self.reserved) >= self.reserve:
            unproven = [c for c in self.reserved if c.awaiting_headers]
            same = [c for c in unproven if c.source == new.source]
            if len(same) * 4 >= self.reserve or (unproven and not same):
                victim = (same if len(same) * 4 >= self.reserve else unproven)[0]
                self.evicted += 1
                victim.close()
                self.forget(victim)
        if len(self.reserved) < self.reserve:
            new.on_probation = True
            self.reserved[new] = None
            return True
        self.refused += 1
        return False

    def _own_victim(self, source: str) -> GuardedProtocol | None:
        """At its source's cap, a newcomer takes the place of its own source's connection
        that does not read, else of its oldest one without headers after HEADERS_GRACE_S (a
        younger one may be a request whose headers are on their way: an operator's, with a
        token, behind an attacker's reconnects from the same address)."""
        own = [c for c in self.open if c.source == source and not c.trusted]
        now = asyncio.get_running_loop().time()
        slow_since, silent_since = now - SLOW_HEADERS_S, now - HEADERS_GRACE_S
        return next((c for c in own if c.stalled), None) or next(
            (
                c
                for c in own
                if (c.awaiting_headers and c.opened < silent_since) or c.unfinished(slow_since)
            ),
            None,
        )

    def _victim(self, mine: int) -> GuardedProtocol | None:
        """Whose place a newcomer from a source holding `mine` connections takes: a
        connection of the biggest source when that holds at least two more (one that does
        not read, or has no headers yet or a request under way, else its newest); else,
        from a source holding more than `mine`, one that does not read, or has sent no
        headers for a second, or whose request is unfinished (a body under way, or later
        headers for a second): a trickled body holds no place for long."""
        biggest = max(self.by_source, key=self.by_source.__getitem__)
        if self.by_source[biggest] >= mine + 2:
            theirs = [c for c in self.open if c.source == biggest and not c.trusted]
            for c in theirs:
                if c.stalled or c.awaiting_headers or c.unfinished(float("inf")):
                    return c
            if theirs:
                return theirs[-1]
        idle_since = asyncio.get_running_loop().time() - SLOW_HEADERS_S
        for c in self.open:
            if (
                self.by_source[c.source] > mine
                and not c.trusted
                and (
                    c.stalled
                    or (c.awaiting_headers and c.opened < idle_since)
                    or c.unfinished(idle_since)
                )
            ):
                return c
        return None

    def _evict(self, victim: GuardedProtocol | None) -> bool:
        if victim is None:
            return False
        self.evicted += 1
        victim.close()  # connection_lost follows later: forget it now
        self.forget(victim)
        return True

    def forget(self, conn: GuardedProtocol) -> None:
        """Once per connection, at eviction or at its end."""
        self.reserved.pop(conn, None)
        if conn in self.open:
            del self.open[conn]
            left = self.by_source[conn.source] - 1
            if left:
                self.by_source[conn.source] = left
            else:
                del self.by_source[conn.source]

    def allowance(self, source: str, now: float) -> int:
        """How many requests the source may send now (rate_per_source a second, a burst
        of three seconds' worth); -1: no limit."""
        if not self.rate_per_source:
            return -1
        bucket = self._bucket(source, now)
        return int(bucket[0])

    def spend(self, source: str, requests: int, now: float) -> None:
        if self.rate_per_source and requests:
            self._bucket(source, now)[0] -= requests

    def _bucket(self, source: str, now: float) -> list[float]:
        burst = 3 * self.rate_per_source
        bucket = self._buckets.pop(source, None) or [burst, now]
        bucket[0] = min(burst, bucket[0] + (now - bucket[1]) * self.rate_per_source)
        bucket[1] = now
        self._buckets[source] = bucket
        while len(self._buckets) > MAX_SOURCES:
            self._buckets.popitem(last=False)
        return bucket

    def counts(self) -> dict[str, int]:
        return {
            "open": len(self.open),
            "reserved": len(self.reserved),
            "refused": self.refused,
            "header_timeouts": self.timed_out,
            "write_timeouts": self.write_timeouts,
            "request_timeouts": self.request_timeouts,
            "evicted": self.evicted,
            "busy": self.busy,
            "throttled": self.throttled,
        }


class GuardedProtocol(asyncio.Protocol):
    """Passes everything to aiohttp's own protocol; watches the first headers and writes.
    A reserve connection's data is held back until its headers show a valid token."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.source = "-"
        self.awaiting_headers = True
        self.on_probation = False
        self.trusted = False  # its first request carried a valid token
        self.stalled = False  # writing paused: the client does not read
        self._head = b""
        self._held = b""  # what a client over its request budget sent, not yet passed on
        self._pump_timer: asyncio.TimerHandle | None = None
        self.opened = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._request_timer: asyncio.TimerHandle | None = None
        self.framing = RequestFraming()  # of what is passed on from a client without a token
        self._inner_started = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        loop = asyncio.get_running_loop()
        self.opened = loop.time()
        self.source = source_key(transport.get_extra_info("peername"))
        if not self.guard.admit(self):
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:  # what answers one connection may have unread in the kernel
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
                # and what it may have sent unread: the kernel would grow it to megabytes
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SEND_BUFFER)
        timeout = self.guard.header_timeout_s
        self._timer = loop.call_later(
            min(timeout, 2.0) if self.on_probation else timeout, self._too_slow
        )
        if not self.on_probation:
            self._start_inner()

    def _start_inner(self) -> None:
        self._inner_started = True
        self.inner.connection_made(self.transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        if self.awaiting_headers:
            self._head += data
            end = self._head.find(HEADER_END)
            if end < 0:
                if self.on_probation and len(self._head) > MAX_HEAD:
                    self._turn_away()
                    return
                if self.on_probation:
                    return  # held back until judged
                self._head = self._head[-MAX_HEAD:]
            else:
                self._headers_done(self._head[: end + 4])
                if self.transport is None or self.transport.is_closing():
                    return
                if self.on_probation:
                    data, self._head = self._head, b""
                    self._start_inner()
                self._head = b""
        if self._inner_started and not self.trusted:
            self._held += data  # passed on as the source's request budget allows
            if self._pump_timer is None:
                self._pump()
            elif len(self._held) > MAX_HELD:
                self.close()
            return
        if self._inner_started:
            self.inner.data_received(data)
            queued = getattr(self.inner, "_messages", ())
            if len(queued) > MAX_QUEUED:  # an aiohttp without its own bound: cut it
                self.close()

    def _pump(self) -> None:
        """Pass on the held requests the source's budget allows; hold the rest, reading
        nothing more meanwhile, and look again when a request's worth has refilled. A
        client over its budget waits — closing it would only make it reconnect at once."""
        self._pump_timer = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        now = asyncio.get_running_loop().time()
        allowed = self.guard.allowance(self.source, now)
        held, cut, passed = self._held, len(self._held), 0
        if allowed >= 0:
            cut = 0
            while passed < allowed:
                end = held.find(HEADER_END, cut)
                if end < 0:
                    break
                cut, passed = end + len(HEADER_END), passed + 1
            if held.find(HEADER_END, cut) < 0:
                cut = len(held)  # the rest holds no whole request head: a body or a part
        data, self._held = held[:cut], held[cut:]
        self.guard.spend(self.source, passed, now)
        if self._held:
            if len(self._held) > MAX_HELD:
                self.close()
                return
            self.guard.throttled += 1
            transport.pause_reading()
            wait = 1.0 / self.guard.rate_per_source
            self._pump_timer = asyncio.get_running_loop().call_later(wait, self._pump)
        elif not self.stalled and not getattr(self.inner, "_buffer_paused", False):
            transport.resume_reading()
        if data:
            self.framing.feed(data, now)
            if self.framing.pending_since is not None and self._request_timer is None:
                self._request_timer = asyncio.get_running_loop().call_later(
                    self.guard.request_timeout_s, self._request_due
                )
            self.inner.data_received(data)
            if len(getattr(self.inner, "_messages", ())) > MAX_QUEUED:  # an old aiohttp
                self.close()

    def unfinished(self, before: float) -> bool:
        """A request of this connection is not whole: its body is under way, or its headers
        (after the first request's) began arriving before `before`."""
        since = self.framing.pending_since
        return since is not None and (self.framing.in_body or since < before)

    def _request_due(self) -> None:
        """A request, once begun, arrives whole within request_timeout_s: a client that
        trickles a body (or a later request's headers) is cut and counted."""
        self._request_timer = None
        since = self.framing.pending_since
        if since is None or self.transport is None or self.transport.is_closing():
            return
        loop = asyncio.get_running_loop()
        left = since + self.guard.request_timeout_s - loop.time()
        if left > 0:  # a later request than the one the timer was set for
            self._request_timer = loop.call_later(left, self._request_due)
            return
        self.guard.request_timeouts += 1
        self.close()

    def _headers_done(self, head: bytes) -> None:
        self.awaiting_headers = False
        if self._timer is not None:
            self._timer.cancel()
        token = bearer_token(head)
        self.trusted = token is not None and self.guard.authorized(token)
        if self.on_probation and not self.trusted:
            self._turn_away()

    def _turn_away(self, status: int = 503, message: str = "") -> None:
        if status == 503:
            self.guard.busy += 1
        self.awaiting_headers = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(
                refusal(
                    status,
                    message
                    or (
                        f"too many admin connections (from {self.source} or in all): "
                        "only a request with a valid token is served now"
                    ),
                )
            )
            self.transport.close()

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self._inner_started else None

    def pause_writing(self) -> None:
        self.stalled = True
        if self._write_timer is None:
            loop = asyncio.get_running_loop()
            self._write_timer = loop.call_later(self.guard.write_timeout_s, self._not_reading)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()  # read no more from a client that does not read
        if self._inner_started:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.stalled = False
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        transport = self.transport
        if (
            transport is not None
            and not transport.is_closing()
            and not self._held  # throttled: _pump resumes
            and not getattr(self.inner, "_buffer_paused", False)  # aiohttp's own pause
        ):
            transport.resume_reading()
        if self._inner_started:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.forget(self)
        for timer in (self._timer, self._write_timer, self._pump_timer, self._request_timer):
            if timer is not None:
                timer.cancel()
        if self._inner_started:
            self.inner.connection_lost(exc)

    def _too_slow(self) -> None:
        if self.awaiting_headers:
            self.guard.timed_out += 1
            self.close()

    def _not_reading(self) -> None:
        self._write_timer = None
        if self.stalled:
            self.guard.write_timeouts += 1
            self.close()

    def close(self) -> None:
        self.awaiting_headers = False
        if self.transport is not None:
            self.transport.abort()
