"""What every admin handler shares: the app's keys, the token check and the audit trail."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from dnsd.admin.audit import AuditLog, now_iso
from dnsd.admin.control import ServerControl
from dnsd.admin.gate import Token, TokenGate

SERVER: web.AppKey[ServerControl] = web.AppKey("server")
GATE: web.AppKey[TokenGate] = web.AppKey("gate")
AUDIT: web.AppKey[AuditLog] = web.AppKey("audit")
HOSTS: web.AppKey[frozenset[str]] = web.AppKey("hosts")


def authorize(request: web.Request, scope: str) -> Token | web.Response:
    """The token that allows `scope`, or the error response to send."""
    return request.app[GATE].check(request, time.monotonic(), scope)


async def audited(
    request: web.Request, token: Token, before: Any, after: Any, response: web.Response
) -> web.Response:
    """Append the write to the audit trail (durably, off the event loop), then answer."""
    entry = {
        "time": now_iso(), "token": token.name, "source": request.remote or "-",
        "method": request.method, "route": request.path[:300], "before": before,
        "after": after, "status": response.status,
    }  # fmt: skip
    await asyncio.to_thread(request.app[AUDIT].append, entry)
    return response
