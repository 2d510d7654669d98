"""systemd readiness and watchdog over `$NOTIFY_SOCKET` (sd_notify(3), written out: a
datagram of `KEY=VALUE` lines; no systemd library needed).

READY=1 once dnsd is ready (the moment `/readyz` turns 200: listeners bound and the first
probe round done), STATUS= lines, WATCHDOG=1 every `WATCHDOG_USEC`/2 from the event loop
(a stalled loop stops the pings, and systemd restarts the service), RELOADING=1 and READY=1
around a reload, STOPPING=1 when stopping. Without `$NOTIFY_SOCKET` every call does nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping

log = logging.getLogger("dnsd.systemd")


class SystemdNotifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        path = env.get("NOTIFY_SOCKET", "")
        # "@name" is a socket in the abstract namespace (a leading NUL byte).
        self._address = ("\0" + path[1:]) if path.startswith("@") else path
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        mine = not pid or pid == str(os.getpid())
        self.watchdog_s = int(usec) / 1e6 / 2 if usec.isdigit() and int(usec) > 0 and mine else None
        self._failed = False

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def send(self, *lines: str) -> None:
        if not self._address:
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto("\n".join(lines).encode(), self._address)
        except OSError as exc:
            if not self._failed:  # one line, not one per watchdog ping
                log.warning("cannot notify systemd at %s: %s", self._address, exc)
                self._failed = True

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def reloading(self) -> None:
        self.send("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")

    def stopping(self) -> None:
        self.send("STOPPING=1")
