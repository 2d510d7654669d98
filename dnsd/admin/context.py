"""What every admin handler shares: the app's keys, the token check and the audit trail."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

from dnsd.admin.audit import RATE_PER_S, UNAUTHENTICATED, AuditLog, entry_size, now_iso
from dnsd.admin.control import ServerControl
from dnsd.admin.gate import Token, TokenGate, error

SERVER: web.AppKey[ServerControl] = web.AppKey("server")
GATE: web.AppKey[TokenGate] = web.AppKey("gate")
AUDIT: web.AppKey[AuditLog] = web.AppKey("audit")
HOSTS: web.AppKey[frozenset[str]] = web.AppKey("hosts")


def _request_key(name: str) -> Any:
    make = getattr(web, "RequestKey", None)  # aiohttp >= 3.12; a plain string before
    return make(name, object) if make is not None else name


TOKEN = _request_key("token")  # the token of a write (valid, maybe without the scope)
AUDITED = _request_key("audited")  # its audit entry is written (or counted)
CHARGED = _request_key("charged")  # its audit budget is taken
RESERVED = _request_key("reserved")  # bytes of the audit trail reserved for its entry


def authorize(request: web.Request, scope: str) -> Token | web.Response:
    """The token that allows `scope`, or the error response to send. A write also takes
    one entry from its token's audit budget: over it, 429 before anything changes."""
    gate = request.app[GATE]
    found = gate.check(request, time.monotonic(), scope)
    if scope == "read":
        return found
    if not isinstance(found, Token):  # a valid token without the scope is named in the trail
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        named = gate.find(credentials) if scheme.lower() == "bearer" and gate.tokens else None
        if named is not None:
            request[TOKEN] = named
        return found
    request[TOKEN] = found
    request[CHARGED] = True
    if not request.app[AUDIT].allow(found.name, time.monotonic()):
        request[AUDITED] = True  # counted in the next audit_suppressed line
        return error(
            429,
            f"token {found.name!r}: more than {RATE_PER_S:g} audited "
            "writes a second; retry in a second",
        )
    return found


def is_write(request: web.Request) -> bool:
    return request.method not in ("GET", "HEAD", "OPTIONS") and request.path.startswith("/api/")


async def audit_refusal(request: web.Request, response: web.StreamResponse) -> None:
    """A write refused before its handler audited it (401/403/400/413/429…): recorded
    with the token's name when it had a valid one, within the budget of that token or of
    every request without one."""
    if request.get(AUDITED) or not is_write(request) or response.status < 400:
        return
    request[AUDITED] = True
    audit = request.app[AUDIT]
    token: Token | None = request.get(TOKEN)
    key = token.name if token is not None else UNAUTHENTICATED
    if not request.get(CHARGED) and not audit.allow(key, time.monotonic()):
        return
    message = ""
    if isinstance(response, web.Response) and response.body:
        try:
            message = str(json.loads(bytes(response.body)).get("error", ""))[:200]  # type: ignore[arg-type]
        except (ValueError, AttributeError):
            message = ""
    entry = {
        "time": now_iso(),
        "token": token.name if token else None,
        "source": request.remote or "-",
        "method": request.method,
        "route": request.path[:300],
        "before": None,
        "after": None,
        "status": response.status,
        "error": message,
    }
    await asyncio.to_thread(audit.append_or_log, entry, request.pop(RESERVED, 0))


async def reserve(request: web.Request, *parts: Any) -> None:
    """Reserve room in the audit trail for the entry of a write about to be applied (its
    before and after as `parts`: the largest they can be): AuditUnavailable when there is
    none, and the write must then be refused, unapplied (dnsd.admin.audit)."""
    audit = request.app[AUDIT]
    reserved = await asyncio.to_thread(lambda: audit.reserve(entry_size(*parts)))
    request[RESERVED] = request.get(RESERVED, 0) + reserved


def release_reserved(request: web.Request) -> None:
    """Room reserved for an entry that was never written (a handler that failed)."""
    reserved = request.pop(RESERVED, 0)
    if reserved:
        request.app[AUDIT].release(reserved)


async def audited(
    request: web.Request, token: Token, before: Any, after: Any, response: web.Response
) -> web.Response:
    """Append the write to the audit trail (durably, off the event loop; into the room
    `reserve` set aside, if it did), then answer. A trail that cannot take the entry does
    not change the answer: the entry goes to the log (the write was applied or refused
    already, and saying otherwise would be false)."""
    entry = {
        "time": now_iso(),
        "token": token.name,
        "source": request.remote or "-",
        "method": request.method,
        "route": request.path[:300],
        "before": before,
        "after": after,
        "status": response.status,
    }
    request[AUDITED] = True
    await asyncio.to_thread(request.app[AUDIT].append_or_log, entry, request.pop(RESERVED, 0))
    return response
