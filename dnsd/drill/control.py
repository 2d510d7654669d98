"""Demo backends as a group, with one control endpoint for all of them.

`GET /backends` lists them; `POST /backends/{name}` with `{"mode": "503"}` (optionally
`"source"`, `"slow_ms"`) switches one. `dnsd demo` serves this on 127.0.0.1:8054 so that
`dnsd drill --control URL` (or curl) can break a backend the way a real outage would.
"""

from __future__ import annotations

import json

from aiohttp import web

from dnsd.drill.backend import DemoBackend
from dnsd.drill.config import BACKENDS


class DemoBackends:
    def __init__(self) -> None:
        self.backends: dict[str, DemoBackend] = {}
        self._runner: web.AppRunner | None = None
        self.control_port = 0

    async def start(self) -> DemoBackends:
        for name, (address, _) in BACKENDS.items():
            self.backends[name] = await DemoBackend(name, host=address, control_port=None).start()
        return self

    @property
    def ports(self) -> dict[str, int]:
        return {name: b.port for name, b in self.backends.items()}

    async def set_mode(
        self, name: str, mode: str, source: str | None = None, slow_ms: float | None = None
    ) -> None:
        await self.backends[name].set_mode(mode, source, slow_ms)

    async def serve_control(self, host: str = "127.0.0.1", port: int = 0) -> int:
        app = web.Application()
        app.router.add_get("/backends", self._list)
        app.router.add_post("/backends/{name}", self._set)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True)
        await site.start()
        self.control_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.control_port

    async def _list(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                name: {
                    "address": b.host,
                    "port": b.port,
                    "mode": b.mode,
                    "source_modes": b.source_modes,
                }
                for name, b in self.backends.items()
            }
        )

    async def _set(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self.backends:
            return web.json_response({"error": f"no backend {name!r}"}, status=404)
        try:
            body = await request.json()
            await self.set_mode(
                name, str(body.get("mode")), body.get("source"), body.get("slow_ms")
            )
        except (ValueError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return await self._list(request)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        for backend in self.backends.values():
            await backend.stop()
