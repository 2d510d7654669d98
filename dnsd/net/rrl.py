"""Response rate limiting for UDP, in the spirit of BIND and Knot RRL.

Reflection attacks send queries with a victim's spoofed source; each answer is sent to the
victim. RRL keeps a token bucket per (client prefix, response): the client's /24 (IPv4) or
/56 (IPv6), and the question plus rcode — all NXDOMAIN/REFUSED/errors from one prefix share
one bucket, so random-name floods are limited as one. A signed zone's compact denial
(RFC 9824) answers a nonexistent name NOERROR with an NSEC whose bitmap holds NXNAME: such
a reply is an NXDOMAIN for this purpose too, else DO=1 floods would escape the bucket.
Over the rate, replies are dropped,
except every `slip`-th, which goes out truncated (TC=1, no records: tiny, no amplification)
so a real client behind that prefix retries over TCP, which cannot be spoofed.
A query with a valid server cookie (RFC 7873 §5.3: its source is not spoofed) is never
limited; the cookie is only checked when the bucket is empty, so the cost falls on floods.
The table is an LRU of at most `max_entries` buckets: memory stays bounded under floods.
"""

from __future__ import annotations

import ipaddress
import struct
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from dnsd.cookies import ServerCookies
from dnsd.dnsname import name_end
from dnsd.query_view import view_of

Verdict = Literal["send", "drop", "slip"]
NEGATIVE_RCODES = frozenset({2, 3, 5})  # SERVFAIL, NXDOMAIN, REFUSED: keyed without the name
NXDOMAIN_KEY = b"\x03"
# The type bitmap of compact denial's NSEC for a nonexistent name: window 0, 17 octets,
# RRSIG (46), NSEC (47) and NXNAME (128) — in a reply, the mark of an NXDOMAIN in disguise.
NXNAME_BITMAP = b"\x00\x11" + b"\x00" * 5 + b"\x03" + b"\x00" * 10 + b"\x80"


@dataclass(frozen=True, slots=True)
class RrlSettings:
    rate: float = 100.0  # responses per second per (prefix, response); 0 disables
    slip: int = 2  # every n-th limited reply is sent truncated; 0 never
    ipv4_prefix: int = 24
    ipv6_prefix: int = 56
    max_entries: int = 100_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float
    limited: int = 0


class ResponseRateLimiter:
    def __init__(self, settings: RrlSettings) -> None:
        self.settings = settings
        self._buckets: OrderedDict[tuple[bytes, bytes], _Bucket] = OrderedDict()
        self.dropped = 0
        self.slipped = 0
        self.exempted = 0  # over the rate, but sent: a valid server cookie
        self.cookies: ServerCookies | None = None  # set by the server when it answers cookies

    @property
    def enabled(self) -> bool:
        return self.settings.rate > 0

    def __len__(self) -> int:
        return len(self._buckets)

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """Its Prometheus collector (Metrics.register)."""
        held = CounterMetricFamily(
            "dnsd_rrl", "Replies held back by response rate limiting", labels=["action"]
        )
        held.add_metric(["dropped"], self.dropped)
        held.add_metric(["slipped"], self.slipped)
        yield held
        exempt = CounterMetricFamily(
            "dnsd_rrl_cookie_exempt", "Replies over the rate sent for a valid server cookie"
        )
        exempt.add_metric([], self.exempted)
        yield exempt
        buckets = GaugeMetricFamily("dnsd_rrl_buckets", "Rate-limit buckets held (bounded)")
        buckets.add_metric([], len(self._buckets))
        yield buckets

    def check(
        self,
        client: ipaddress.IPv4Address | ipaddress.IPv6Address,
        reply: bytes,
        now: float,
        exempt: Callable[[], bool] | None = None,
    ) -> Verdict:
        s = self.settings
        key = (_prefix(client, s), _response_key(reply))
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(tokens=s.rate, at=now)
            self._buckets[key] = bucket
            if len(self._buckets) > s.max_entries:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(s.rate, bucket.tokens + (now - bucket.at) * s.rate)
            bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return "send"
        if exempt is not None and exempt():
            self.exempted += 1
            return "send"
        bucket.limited += 1
        if s.slip and bucket.limited % s.slip == 0:
            self.slipped += 1
            return "slip"
        self.dropped += 1
        return "drop"


def limited(
    rrl: ResponseRateLimiter,
    client: ipaddress.IPv4Address | ipaddress.IPv6Address,
    reply: bytes,
    query: bytes = b"",
) -> bytes | None:
    """What a UDP listener sends: the reply, its truncated slip, or None (dropped)."""
    cookies = rrl.cookies

    def exempt() -> bool:
        return cookies is not None and has_valid_cookie(query, client, cookies, time.time())

    verdict = rrl.check(client, reply, time.monotonic(), exempt if cookies and query else None)
    if verdict == "drop":
        return None  # counted by the limiter
    return truncated(reply) if verdict == "slip" else reply


def has_valid_cookie(
    query: bytes,
    client: ipaddress.IPv4Address | ipaddress.IPv6Address,
    cookies: ServerCookies,
    now: float,
) -> bool:
    """Whether a query's COOKIE option (read by its query view) holds a server cookie this
    server made for this client."""
    view = view_of(query)
    cookie = view.edns.cookie if view is not None and view.edns is not None else None
    return cookie is not None and cookies.valid(cookie[0], cookie[1], client, now)


def _prefix(client: ipaddress.IPv4Address | ipaddress.IPv6Address, s: RrlSettings) -> bytes:
    bits = s.ipv4_prefix if client.version == 4 else s.ipv6_prefix
    packed = int.from_bytes(client.packed, "big") >> (client.max_prefixlen - bits)
    return bytes([client.version]) + packed.to_bytes(16, "big")


def _response_key(reply: bytes) -> bytes:
    rcode = reply[3] & 0x0F if len(reply) >= 4 else 0
    if rcode in NEGATIVE_RCODES or len(reply) < 12:
        return bytes([rcode])
    if rcode == 0 and NXNAME_BITMAP in reply:  # a memchr-speed scan of a few hundred bytes
        return NXDOMAIN_KEY
    end = _question_end(reply)
    return bytes([rcode]) + reply[12:end].lower()


def _question_end(reply: bytes) -> int:
    end = name_end(reply, 12, pointers=False)
    return len(reply) if end is None else min(len(reply), end + 4)


def truncated(reply: bytes) -> bytes:
    """The slip reply: the header with TC=1 and no records, plus the question."""
    end = _question_end(reply)
    ident, flags = struct.unpack_from("!HH", reply)
    qdcount = 1 if end > 12 else 0
    return struct.pack("!HHHHHH", ident, flags | 0x0200, qdcount, 0, 0, 0) + reply[12:end]
