"""Hostile admin clients for the hardening tests and the soak, and a blocking
HTTP request from a chosen source address (loopback has all of 127/8)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from typing import Any, Self

PIPELINED = b"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 64


def request_from(
    source: str,
    port: int,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = None,
    timeout: float = 5.0,
) -> tuple[int, Any]:
    """One request on a new connection from `source`; (status, JSON or text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                      source_address=(source, 0))  # fmt: skip
    headers = {"Host": "127.0.0.1"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        text = response.read().decode()
    finally:
        conn.close()
    try:
        return response.status, json.loads(text)
    except json.JSONDecodeError:
        return response.status, text


class Jammer:
    """`connections` sockets, one for each of `sources` in turn, held open against the
    admin port by a thread of their own (`_run`) until the `with` block ends; `_open`
    connects one, sends `first` and makes it non-blocking (None when that fails)."""

    rcvbuf: int | None = None  # a small receive buffer fills up sooner
    first = b""  # sent once connected

    def __init__(self, port: int, sources: list[str], connections: int) -> None:
        self.port = port
        self.sources = sources
        self.connections = connections
        self.stop = threading.Event()
        self.reconnects = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(10)

    def _open(self, i: int) -> socket.socket | None:
        s = socket.socket()
        try:
            if self.rcvbuf is not None:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)
            s.bind((self.sources[i % len(self.sources)], 0))
            s.settimeout(0.5)
            s.connect(("127.0.0.1", self.port))
            if self.first:
                s.sendall(self.first)
            s.setblocking(False)
            return s
        except OSError:
            s.close()
            return None

    def _run(self) -> None:
        raise NotImplementedError


class PipeliningJammer(Jammer):
    """Sockets that pipeline GETs as fast as the server takes them and never read an
    answer; a connection the server closes is opened again at once."""

    rcvbuf = 4096

    def __init__(self, port: int, sources: list[str], connections: int) -> None:
        super().__init__(port, sources, connections)
        self.sent = 0

    def _run(self) -> None:
        socks: list[socket.socket | None] = [None] * self.connections
        try:
            while not self.stop.is_set():
                for i, s in enumerate(socks):
                    if s is None:
                        socks[i] = s = self._open(i)
                        self.reconnects += 1
                        if s is None:
                            continue
                    try:
                        self.sent += s.send(PIPELINED)
                    except BlockingIOError:
                        pass
                    except OSError:
                        s.close()
                        socks[i] = None
                time.sleep(0.01)
        finally:
            for s in socks:
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()


SLOW_HEAD = (
    b"PUT /api/v1/overrides/pools/us-east HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n"
)


class SlowBodyJammer(Jammer):
    """Sockets that send a request's headers at once and then its body a byte every
    `every_s` (never finishing it); a connection the server closes is opened again at
    once."""

    first = SLOW_HEAD

    def __init__(
        self, port: int, sources: list[str], connections: int, every_s: float = 0.5
    ) -> None:
        super().__init__(port, sources, connections)
        self.every_s = every_s
        self.trickled = 0

    def _run(self) -> None:
        socks: list[socket.socket | None] = [None] * self.connections
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                for i, s in enumerate(socks):
                    if s is None:
                        socks[i] = self._open(i)
                        self.reconnects += 1
                        continue
                    try:
                        if s.recv(4096) == b"":  # closed by the server: start again
                            raise ConnectionResetError
                    except BlockingIOError:
                        pass
                    except OSError:
                        s.close()
                        socks[i] = None
                        continue
                    try:
                        self.trickled += s.send(b" ")
                    except BlockingIOError:
                        pass
                    except OSError:
                        s.close()
                        socks[i] = None
                self.stop.wait(max(0.0, self.every_s - (time.monotonic() - started)))
        finally:
            for s in socks:
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()
