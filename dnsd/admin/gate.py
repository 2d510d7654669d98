"""What an admin request must pass before a handler sees it.

* **Host**: only an address literal, `localhost`, the admin bind name or this machine's
  name — a web page whose name was rebound to 127.0.0.1 cannot read the API (DNS
  rebinding); others get 421.
* **Token**: `Authorization: Bearer TOKEN`, scheme case-insensitive (RFC 9110 §11.1),
  compared in constant time. A valid token is never refused for what others sent from its
  address: 5 wrong tokens from one address within a minute make that address's
  *wrong* tokens answer 429 for a minute (throttled, not checked further), in a bounded
  table; the right token from the same address keeps working.
* **JSON bodies**: `application/json` in UTF-8, one object, no duplicate keys, bounded
  nesting; anything else is a 400 that names the problem.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web

FAILURES_ALLOWED = 5
FAILURE_WINDOW_S = 60.0
LOCKOUT_S = 60.0
MAX_SOURCES = 10_000  # addresses tracked for failed tokens (least recently seen go first)


def error(status: int, message: str) -> web.Response:
    """The API's one error shape: {"error": message}."""
    from aiohttp import web  # the admin API's: a server without it does not load aiohttp

    return web.json_response({"error": message}, status=status)


class BadRequest(Exception):
    """A 400 with a message for the client."""


def allowed_hosts(bind_host: str | None) -> frozenset[str]:
    names = {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
    if bind_host and bind_host not in ("0.0.0.0", "::", ""):
        names.add(bind_host.lower())
    return frozenset(names)


def host_allowed(header: str | None, names: frozenset[str]) -> bool:
    if not header:
        return True  # HTTP/1.0 clients send none: no browser, no rebinding
    host = header.strip().lower()
    if host.startswith("["):  # [v6]:port
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return host.rstrip(".") in names


@dataclass(slots=True)
class _Failures:
    count: int
    since: float
    locked_until: float = 0.0


SCOPES = ("read", "override", "admin")  # each includes the ones before it


@dataclass(frozen=True, slots=True)
class Token:
    """An admin API token: a name (in the audit log), a scope, and the SHA-256 of its
    secret — the secret itself is never kept."""

    name: str
    scope: str
    sha256: bytes

    @staticmethod
    def from_secret(name: str, scope: str, secret: str) -> Token:
        return Token(name, scope, hashlib.sha256(secret.encode()).digest())


class TokenGate:
    def __init__(self, tokens: tuple[Token, ...]) -> None:
        self.tokens = tokens
        self._failures: OrderedDict[str, _Failures] = OrderedDict()

    def check(self, request: web.Request, now: float, scope: str) -> Token | web.Response:
        """The token that allows `scope`, or the error response to send."""
        if not self.tokens:
            return error(
                403, "writes are disabled: no admin token is configured (DNSD_ADMIN_TOKEN)"
            )
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            return error(401, "missing bearer token")
        found = self.find(credentials)
        if found is None:
            source = request.remote or "-"
            seen = self._failures.get(source)
            if seen is not None and seen.locked_until > now:
                wait = int(seen.locked_until - now) + 1
                return error(429, f"too many wrong tokens from {source}: retry in {wait}s")
            self._failed(source, now)
            return error(403, "wrong token")
        if SCOPES.index(found.scope) < SCOPES.index(scope):
            return error(403, f"token {found.name!r} has scope {found.scope}: this needs {scope}")
        return found

    def find(self, credentials: str) -> Token | None:
        """The token whose secret this is, or None: every one compared, each in constant
        time (a wrong token costs the same whatever it resembles)."""
        digest = hashlib.sha256(credentials.strip().encode()).digest()
        found = None
        for token in self.tokens:
            if hmac.compare_digest(digest, token.sha256):
                found = token
        return found

    def _failed(self, source: str, now: float) -> None:
        seen = self._failures.pop(source, None)
        if seen is None or now - seen.since > FAILURE_WINDOW_S:
            seen = _Failures(0, now)
        seen.count += 1
        if seen.count >= FAILURES_ALLOWED:
            seen.locked_until = now + LOCKOUT_S
        self._failures[source] = seen
        while len(self._failures) > MAX_SOURCES:
            self._failures.popitem(last=False)


def _no_constant(name: str) -> Any:
    raise BadRequest(f"{name} is not a number JSON allows (RFC 8259)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadRequest(f"duplicate key {key!r} in the JSON body")
        out[key] = value
    return out


async def json_object(request: web.Request, allowed: set[str] | None) -> dict[str, Any]:
    """The body as one JSON object; `allowed`: its only permitted keys (None: any)."""
    if request.content_type != "application/json":
        raise BadRequest("the body must be JSON (Content-Type: application/json)")
    if (request.charset or "utf-8").lower() not in ("utf-8", "utf8"):
        raise BadRequest("the body must be UTF-8")
    raw = await request.read()
    try:
        body = json.loads(
            raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant
        )
    except BadRequest:
        raise
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError included
        raise BadRequest("the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    unknown = set(body) - allowed if allowed is not None else set()
    if unknown:
        raise BadRequest(f"unknown field(s): {', '.join(sorted(unknown))}")
    return body
