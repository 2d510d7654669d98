"""dnsd.admin.guard: at its source's cap, a newcomer takes the place of an own connection
without headers only once that one has had HEADERS_GRACE_S to send them (a younger one
may be a request on its way), on a real loopback server."""

from __future__ import annotations

import asyncio
import socket

from dnsd.admin.guard import HEADERS_GRACE_S, ConnectionGuard


async def _connect(port: int, source: str) -> socket.socket:
    s = socket.socket()
    s.setblocking(False)
    s.bind((source, 0))
    await asyncio.get_running_loop().sock_connect(s, ("127.0.0.1", port))
    return s


async def _evictions() -> tuple[int, int]:
    guard = ConnectionGuard(asyncio.Protocol, max_connections=10, header_timeout_s=10,
                            per_source=1)  # fmt: skip
    loop = asyncio.get_running_loop()
    guarded = await loop.create_server(guard, "127.0.0.1", 0)
    port = guarded.sockets[0].getsockname()[1]
    held = [await _connect(port, "127.0.6.1")]
    await asyncio.sleep(0.05)
    held.append(await _connect(port, "127.0.6.1"))  # the first is young: not taken
    await asyncio.sleep(0.05)
    young = guard.evicted
    await asyncio.sleep(HEADERS_GRACE_S)
    held.append(await _connect(port, "127.0.6.1"))  # now it is: taken
    await asyncio.sleep(0.05)
    old = guard.evicted
    for s in held:
        s.close()
    guarded.close()
    return young, old


def test_a_newcomer_takes_an_own_silent_place_only_after_the_grace() -> None:
    young, old = asyncio.run(_evictions())
    assert (young, old) == (0, 1)
