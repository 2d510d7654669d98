"""Probe implementations: HTTP/HTTPS through one shared aiohttp session, TCP connect.

Each probe returns a ProbeResult and never raises; a slow or hung backend costs one
timeout. `retries` immediate re-tries happen inside one probe before it counts as failed,
all within the one `timeout`.

A probe's error is shown in the status API and page, events, webhooks and logs, and its
text can come from the backend (a malformed status line or header that the HTTP client
quotes, a TLS alert): it is one line of at most `ERROR_LIMIT` printable characters,
whatever the backend sends (`one_line`); a TLS failure names its reason, not the stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ssl
import time
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from dnslib import RCODE

from dnsd.config.model import Backend, Monitor
from dnsd.health.fsm import ProbeResult

if TYPE_CHECKING:
    import aiohttp

SOURCE_HEADER = "X-Dnsd-Probe-Source"
BODY_LIMIT = 64 * 1024
ERROR_LIMIT = 200  # characters of a probe error


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """Where a probe goes: a host (address or name) and port, checked by a monitor."""

    monitor: str
    host: str
    port: int


def target_of(backend: Backend, monitor: Monitor) -> ProbeTarget:
    host = (
        str(backend.address) if backend.address is not None else str(backend.hostname).rstrip(".")
    )
    default_port = 443 if monitor.type == "https" else 80
    port = monitor.port or backend.port or default_port
    return ProbeTarget(monitor.name, host, port)


async def probe(
    session: aiohttp.ClientSession,
    target: ProbeTarget,
    monitor: Monitor,
    source: str,
    budget_s: float | None = None,
) -> ProbeResult:
    """One probe, retries included, within `timeout` as a whole (docs/health.md: each retry gets
    the time left), so `retries` never stretches the outage bound. `budget_s`: what is left of
    the timeout after waiting for a probe slot (default: all of it)."""
    budget = monitor.timeout_s if budget_s is None else max(0.001, min(budget_s, monitor.timeout_s))
    deadline = time.perf_counter() + budget
    result = await _once(session, target, monitor, source, budget)
    for _ in range(monitor.retries):
        left = deadline - time.perf_counter()
        if result.ok or result.local or left <= 0:
            break
        result = await _once(session, target, monitor, source, left)
    return result


async def _once(
    session: aiohttp.ClientSession,
    target: ProbeTarget,
    monitor: Monitor,
    source: str,
    timeout_s: float,
) -> ProbeResult:
    import aiohttp  # loaded by the scheduler's first probe (see dnsd.health.scheduler)

    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            if monitor.type == "tcp":
                error = await _tcp(target)
            elif monitor.type in ("http", "https"):
                error = await _http(session, target, monitor, source)
            else:
                error = await _dns(target, monitor)
    except TimeoutError:
        error = f"timeout after {monitor.timeout_s:g}s"
    except (OSError, aiohttp.ClientError) as exc:
        error = one_line(describe(exc))
        if is_local_failure(exc):
            return ProbeResult(False, time.time(), None, error, local=True)
    rtt_ms = (time.perf_counter() - started) * 1000.0
    if error is None:
        return ProbeResult(True, time.time(), rtt_ms)
    return ProbeResult(False, time.time(), None, one_line(error))


def describe(exc: BaseException) -> str:
    """An exception as an operator reads it: a TLS failure by its reason (the certificate
    check's message, or the TLS alert), anything else as `Type: text`."""
    seen: BaseException | None = exc
    for _ in range(8):  # aiohttp wraps the ssl error (certificate_error, os_error, __cause__)
        if seen is None:
            break
        verify = getattr(seen, "verify_message", None)  # ssl.SSLCertVerificationError
        if isinstance(verify, str) and verify:
            return f"TLS: the certificate was refused ({verify})"
        reason = getattr(seen, "reason", None)  # ssl.SSLError: the TLS alert or library reason
        if type(seen).__module__ == "ssl" and isinstance(reason, str) and reason:
            return f"TLS: {reason}"
        inner = getattr(seen, "certificate_error", None) or getattr(seen, "os_error", None)
        seen = inner if isinstance(inner, BaseException) else (seen.__cause__ or seen.__context__)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def one_line(text: str, limit: int = ERROR_LIMIT) -> str:
    """`text` as one line of at most `limit` printable characters: control characters and
    line breaks (any Unicode one) become spaces, runs of spaces one, a longer text is cut
    with "…"."""
    if len(text) > 4 * limit:
        text = text[: 4 * limit]  # what is cut anyway is not looked at
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# Failures that say something about this machine, not about the backend: out of
# descriptors or buffers, no local address or route. Such a probe gives no result.
LOCAL_ERRNOS = frozenset(
    {
        errno.EMFILE,
        errno.ENFILE,
        errno.ENOBUFS,
        errno.ENOMEM,
        errno.EADDRNOTAVAIL,
        errno.ENETUNREACH,
    }
)


def is_local_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # aiohttp wraps the OSError (os_error, __cause__)
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno in LOCAL_ERRNOS:
            return True
        inner = getattr(seen, "os_error", None)
        seen = inner if isinstance(inner, BaseException) else (seen.__cause__ or seen.__context__)
    return False


async def _tcp(target: ProbeTarget) -> str | None:
    _, writer = await asyncio.open_connection(target.host, target.port)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


async def _http(
    session: aiohttp.ClientSession, target: ProbeTarget, monitor: Monitor, source: str
) -> str | None:
    scheme = "https" if monitor.type == "https" else "http"
    host = f"[{target.host}]" if ":" in target.host else target.host
    url = f"{scheme}://{host}:{target.port}{monitor.path}"
    headers = {SOURCE_HEADER: source, **monitor.headers}
    if monitor.host:
        headers["Host"] = monitor.host
    tls: ssl.SSLContext | bool = False
    server_name = None
    if monitor.type == "https":
        # docs/health.md: SNI and certificate checked against `host` when set (a backend given
        # as an IP literal behind a name), else the backend's own host name or address.
        tls = _tls_context(monitor.ca_file, monitor.allow_insecure)
        server_name = monitor.host.split(":")[0] if monitor.host else None
    async with session.request(
        monitor.method,
        url,
        headers=headers,
        allow_redirects=monitor.follow_redirects,
        ssl=tls,
        server_hostname=server_name,
    ) as response:
        status = response.status
        if not any(lo <= status <= hi for lo, hi in monitor.expected_codes):
            return f"HTTP {status}"
        if monitor.expected_body is not None:
            body = await response.content.read(BODY_LIMIT)
            if monitor.expected_body.encode() not in body:
                return f"HTTP {status}: body lacks {monitor.expected_body!r}"
    return None


@cache
def _tls_context(ca_file: str | None, insecure: bool) -> ssl.SSLContext:
    """One context per (CA file, insecure): loading CAs per probe would cost milliseconds."""
    context = ssl.create_default_context(cafile=ca_file)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def dns_query(monitor: Monitor, query_id: int) -> bytes:
    """The probe's question (RD clear: a backend answers from what it serves)."""
    labels = [p.encode("ascii") for p in monitor.query_name.rstrip(".").split(".") if p]
    qname = b"".join(bytes([len(label)]) + label for label in labels) + b"\x00"
    header = query_id.to_bytes(2, "big") + b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    return header + qname + monitor.query_type.to_bytes(2, "big") + b"\x00\x01"


async def _dns(target: ProbeTarget, monitor: Monitor) -> str | None:
    """`dns`: the backend answers the monitor's question (default '.' SOA) with one of the
    expected rcodes (default NOERROR): SERVFAIL or REFUSED is a failure (docs/health.md)."""
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[bytes] = loop.create_future()

    class _Proto(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: object) -> None:
            if not answered.done():
                answered.set_result(data)

    transport, _ = await loop.create_datagram_endpoint(
        _Proto, remote_addr=(target.host, target.port)
    )
    try:
        transport.sendto(dns_query(monitor, 0x1234))
        data = await answered
    finally:
        transport.close()
    if len(data) < 12 or data[:2] != b"\x12\x34" or not data[2] & 0x80:
        return "not a DNS response"
    rcode = data[3] & 0x0F
    if rcode not in monitor.expected_rcodes:
        return f"DNS rcode {RCODE.get(rcode, rcode)}"
    return None
