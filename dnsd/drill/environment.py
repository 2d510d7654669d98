"""Where a drill runs: in a box (its own demo backends, dnsd and unbound on free loopback
ports, all stopped afterwards) or against a running deployment (admin API, DNS address,
optional resolver and demo-backend control URL)."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from dnsd.drill.config import DEFAULT_TIMING, ZONE, Timing, demo_config
from dnsd.drill.control import DemoBackends
from dnsd.drill.ports import free_port_pair
from dnsd.drill.process import DnsdProcess
from dnsd.drill.resolver import Unbound


class Environment:
    timing: Timing = DEFAULT_TIMING
    dns: tuple[str, int] = ("127.0.0.1", 5353)
    resolver: tuple[str, int] | None = None
    can_restart = False
    can_break_backends = False

    def __init__(self, admin_url: str, token: str | None) -> None:
        self.admin_url = admin_url.rstrip("/")
        self.token = token
        self._session: aiohttp.ClientSession | None = None

    async def admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with self._session.request(
            method, self.admin_url + path, json=body, headers=headers
        ) as r:
            return r.status, await r.json(content_type=None)

    async def set_mode(self, backend: str, mode: str) -> None:
        raise NotImplementedError

    async def restart_dnsd(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class BoxEnvironment(Environment):
    can_restart = True
    can_break_backends = True

    def __init__(self, timing: Timing = DEFAULT_TIMING, with_resolver: bool = True) -> None:
        super().__init__("", secrets.token_hex(16))
        self.timing = timing
        self.with_resolver = with_resolver
        self.dir = Path(tempfile.mkdtemp(prefix="dnsd-drill-"))
        self.backends = DemoBackends()
        self.dnsd: DnsdProcess | None = None
        self.unbound: Unbound | None = None

    async def start(self) -> BoxEnvironment:
        await self.backends.start()
        (self.dir / "zones").mkdir()
        (self.dir / "zones" / "demo.yaml").write_text(demo_config(self.backends.ports, self.timing))
        self.dns = ("127.0.0.1", free_port_pair())
        self.dnsd = await self._start_dnsd()
        if self.with_resolver:
            self.unbound = await Unbound(ZONE, self.dns[1]).start()
            self.resolver = ("127.0.0.1", self.unbound.port)
        return self

    async def _start_dnsd(self) -> DnsdProcess:
        proc = DnsdProcess(
            self.dir / "zones",
            "--pop-region",
            "WEU",
            "--reuse-port",
            "--state-dir",
            str(self.dir / "state"),
            "--rrl-rate",
            "0",  # drills send thousands of identical queries from one address
            env={"DNSD_ADMIN_TOKEN": self.token or ""},
            listen=f"{self.dns[0]}:{self.dns[1]}",
        )
        await asyncio.to_thread(proc.__enter__)
        self.admin_url = f"http://127.0.0.1:{proc.admin_port}"
        return proc

    async def set_mode(self, backend: str, mode: str) -> None:
        await self.backends.set_mode(backend, mode)

    async def restart_dnsd(self) -> None:
        """Start a new dnsd on the same port (SO_REUSEPORT) before stopping the old one, so
        no query finds the port closed; the new one binds only after its first probes."""
        old = self.dnsd
        self.dnsd = await self._start_dnsd()
        if old is not None:
            await asyncio.to_thread(old.stop)

    async def close(self) -> None:
        await super().close()
        if self.unbound is not None:
            self.unbound.stop()
        if self.dnsd is not None and self.dnsd.proc is not None:
            await asyncio.to_thread(self.dnsd.stop)
        await self.backends.stop()


class RemoteEnvironment(Environment):
    """A running dnsd (for example `dnsd demo`): faults through its demo-backend control
    endpoint when given, else through admin-API overrides."""

    def __init__(
        self,
        admin_url: str,
        token: str | None,
        dns: tuple[str, int],
        resolver: tuple[str, int] | None,
        control_url: str | None,
        timing: Timing,
    ) -> None:
        super().__init__(admin_url, token)
        self.dns, self.resolver, self.timing = dns, resolver, timing
        self.control_url = control_url.rstrip("/") if control_url else None
        self.can_break_backends = control_url is not None

    async def set_mode(self, backend: str, mode: str) -> None:
        assert self.control_url is not None
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        async with self._session.post(
            f"{self.control_url}/backends/{backend}", json={"mode": mode}
        ) as r:
            if r.status != 200:
                raise RuntimeError(f"demo control: {r.status} {await r.text()}")
