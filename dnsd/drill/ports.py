"""Free loopback ports for the processes a drill starts."""

from __future__ import annotations

import socket


def free_port_pair() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 (dnsd and unbound bind both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = int(t.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                try:
                    u.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise OSError("no free port")
