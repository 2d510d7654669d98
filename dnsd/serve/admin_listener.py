"""The admin HTTP listener: the admin app behind a connection guard (header, request and
write timeouts, places per source, a reserve only a valid token gets), on the admin address."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from dnsd.admin.audit import AuditLog
from dnsd.admin.control import ServerControl
from dnsd.admin.gate import Token, TokenGate
from dnsd.admin.guard import ConnectionGuard

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger("dnsd.server")  # one logger for every part of serving
ADMIN_HEADER_TIMEOUT_S = 10.0  # a new admin connection sends its request headers by then
ADMIN_KEEPALIVE_S = 15.0  # an idle keep-alive admin connection is closed after this
ADMIN_REQUEST_TIMEOUT_S = 10.0  # a request, once begun, arrives whole (headers and body)
ADMIN_WRITE_TIMEOUT_S = 5.0  # a client that reads none of its answers for this long is cut
ADMIN_PER_SOURCE = 16  # admin connections from one address (an IPv6 /64)
ADMIN_RATE_PER_SOURCE = 50.0  # requests a second from one address without a token


class AdminListener:
    def __init__(
        self,
        server: ServerControl,
        tokens: Callable[[], tuple[Token, ...]],
        audit: AuditLog,
        connections: int,
        reuse_port: bool,
    ) -> None:
        self.server = server
        self.tokens = tokens  # read again at each call: a reload may change them
        self.audit = audit
        self.connections = connections  # the descriptors the admin API may hold
        self.reuse_port = reuse_port
        self.bound: tuple[str, int] | None = None
        self.guard: ConnectionGuard | None = None
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None

    def gate(self) -> TokenGate | None:
        if self._runner is None:
            return None
        from dnsd.admin.context import GATE

        return self._runner.app[GATE]

    async def start(self, host: str, port: int) -> None:
        # The admin app and its HTTP server (~15 MiB of aiohttp) load only when the admin
        # API is on: `--admin off` serves DNS without them.
        from aiohttp import web

        from dnsd.admin.app import build_app
        from dnsd.admin.context import GATE

        self._runner = web.AppRunner(
            build_app(self.server, self.tokens(), host, self.audit),
            access_log=None,
            keepalive_timeout=ADMIN_KEEPALIVE_S,
        )
        await self._runner.setup()
        factory = self._runner.server
        assert factory is not None
        gate = self._runner.app[GATE]  # the API's own: a reload changes both at once
        reserve = max(2, self.connections // 8)  # places only a valid token gets
        general = max(self.connections - reserve, 2)
        self.guard = ConnectionGuard(
            factory,
            general,
            ADMIN_HEADER_TIMEOUT_S,
            reserve=reserve,
            per_source=min(ADMIN_PER_SOURCE, general),
            write_timeout_s=ADMIN_WRITE_TIMEOUT_S,
            request_timeout_s=ADMIN_REQUEST_TIMEOUT_S,
            authorized=lambda secret: gate.find(secret) is not None,
            rate_per_source=ADMIN_RATE_PER_SOURCE,
        )
        loop = asyncio.get_running_loop()
        # --reuse-port: a new dnsd binds the same admin port while the old one still runs.
        self._server = await loop.create_server(
            self.guard, host, port, reuse_address=True, reuse_port=self.reuse_port or None
        )
        bound = self._server.sockets[0].getsockname()
        self.bound = (host, bound[1])
        tokens = self.tokens()
        writes = f"{len(tokens)} token(s)" if tokens else "refused (no DNSD_ADMIN_TOKEN)"
        log.info("admin API on http://%s:%d/ (writes %s)", url_host(host), bound[1], writes)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._runner is not None:
            await self._runner.cleanup()


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
