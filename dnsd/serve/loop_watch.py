"""The serving loops' liveness in systemd's STATUS: every listener that is down is named,
and a line says when all serve again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from dnsd.net.sdnotify import SystemdNotifier
from dnsd.net.supervisor import ServingLoops
from dnsd.snapshot import SnapshotHolder

LOOP_WATCH_S = 0.5  # how soon systemd's STATUS names a listener that is down


async def watch_loops(
    loops: ServingLoops,
    systemd: SystemdNotifier,
    ready_to_serve: Callable[[], bool],
    holder: SnapshotHolder,
) -> None:
    """systemd's STATUS names every listener that is down, and says when all serve again."""
    said: list[str] = []
    while True:
        await asyncio.sleep(LOOP_WATCH_S)
        down = loops.down()
        if down != said and ready_to_serve():
            if down:
                systemd.send(f"STATUS=serving loop down: {'; '.join(down)}")
            else:
                zones = len(holder.current.zones)
                systemd.send(f"STATUS=serving {zones} zone(s): every loop is back")
            said = down
