"""systemd (Type=notify) while serving: READY=1 once the server is ready, and the
watchdog's pings from the event loop itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from dnsd.net.sdnotify import SystemdNotifier
from dnsd.snapshot import SnapshotHolder


async def tell_ready(
    systemd: SystemdNotifier,
    ready: Callable[[], bool],
    holder: SnapshotHolder,
    bound: list[tuple[str, int]],
) -> None:
    """READY=1 when /readyz turns 200 (the first probe round may end after binding)."""
    while not ready():
        await asyncio.sleep(0.05)
    zones = len(holder.current.zones)
    listen = " ".join(f"{h}:{p}" for h, p in bound)
    systemd.ready(f"serving {zones} zone(s) on {listen}")


async def watchdog(systemd: SystemdNotifier) -> None:
    """WATCHDOG=1 from the event loop itself: if the loop stalls, the pings stop."""
    assert systemd.watchdog_s is not None
    while True:
        systemd.send("WATCHDOG=1")
        await asyncio.sleep(systemd.watchdog_s)
