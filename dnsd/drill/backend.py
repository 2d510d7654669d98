"""A demo backend: a small HTTP server whose health answer can be switched at run time.

Modes: `ok` (200), `503`, `refused` (stops listening), `blackhole` (accepts, never
answers), `slow` (answers after `slow_ms`). A mode can be set for one probe source only
(matched on the `X-Dnsd-Probe-Source` header), so a test can fail a backend from one region.
Control: `POST /control {"mode": "503", "source": "WEU", "slow_ms": 300}` on the control
port (which keeps listening while the backend "refuses"), or `set_mode()` in-process.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from aiohttp import web

from dnsd.health.probes import SOURCE_HEADER

MODES = ("ok", "503", "refused", "blackhole", "slow")


class DemoBackend:
    def __init__(
        self, name: str, host: str = "127.0.0.1", port: int = 0, control_port: int | None = 0
    ) -> None:
        self.name = name
        self.host = host
        self.port = port
        self.control_port = control_port
        self.mode = "ok"
        self.source_modes: dict[str, str] = {}
        self.slow_ms = 500.0
        self.source_slow_ms: dict[str, float] = {}  # a path's own delay (the lab's dynamic-rtt)
        self.requests: Counter[str] = Counter()  # per probe source
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._control_runner: web.AppRunner | None = None
        self._hung: set[asyncio.Future[None]] = set()

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> DemoBackend:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._health)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        await self._listen()
        if self.control_port is not None:
            control = web.Application()
            control.router.add_post("/control", self._control)
            control.router.add_get("/control", self._status)
            self._control_runner = web.AppRunner(control, access_log=None)
            await self._control_runner.setup()
            site = web.TCPSite(
                self._control_runner, self.host, self.control_port, reuse_address=True
            )
            await site.start()
            self.control_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def _listen(self) -> None:
        assert self._runner is not None
        self._site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await self._site.start()
        self.port = self._site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        self._release_hung()
        if self._control_runner is not None:
            await self._control_runner.cleanup()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- control -----------------------------------------------------------------------------
    async def set_mode(
        self, mode: str, source: str | None = None, slow_ms: float | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        if slow_ms is not None and source is None:
            self.slow_ms = float(slow_ms)
        if source is not None:
            self.source_modes[source] = mode
            if slow_ms is not None:
                self.source_slow_ms[source] = float(slow_ms)
            return
        self.source_modes.clear()
        self.source_slow_ms.clear()
        was_refusing = self.mode == "refused"
        self.mode = mode
        if mode == "refused" and not was_refusing and self._site is not None:
            await self._site.stop()
            self._site = None
        elif mode != "refused" and was_refusing:
            await self._listen()
        if mode != "blackhole":
            self._release_hung()

    def _release_hung(self) -> None:
        for fut in self._hung:
            if not fut.done():
                fut.set_result(None)
        self._hung.clear()

    async def _control(self, request: web.Request) -> web.Response:
        try:
            body: dict[str, Any] = await request.json()
            await self.set_mode(str(body.get("mode")), body.get("source"), body.get("slow_ms"))
        except (ValueError, TypeError, json.JSONDecodeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return await self._status(request)

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "name": self.name,
                "mode": self.mode,
                "source_modes": self.source_modes,
                "port": self.port,
                "requests": dict(self.requests),
            }
        )

    # -- the health endpoint -----------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.StreamResponse:
        source = request.headers.get(SOURCE_HEADER, "")
        self.requests[source] += 1
        mode = self.source_modes.get(source, self.mode)
        if mode == "503":
            return web.Response(status=503, text="unavailable\n")
        if mode == "blackhole":
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._hung.add(fut)
            try:
                await fut  # released when the mode changes or the backend stops
            finally:
                self._hung.discard(fut)
            raise web.HTTPServiceUnavailable
        if mode == "slow":
            await asyncio.sleep(self.source_slow_ms.get(source, self.slow_ms) / 1000.0)
        return web.Response(text=f"ok {self.name}\n")
