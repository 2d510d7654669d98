"""A node whose Redis connection dies without closing — a route dropped, a peer frozen: the
client only ever reads "no message" — notices the silence, reconnects and agrees with the
others again (the health bus's watchdog, dnsd.cluster.bus.SILENT_S)."""

from __future__ import annotations

import asyncio
import time

import pytest

from dnsd.cluster.bus import SILENT_S
from tests.e2e.test_multinode import all_nodes, running_cluster
from tests.loop_thread import LoopThread
from tests.processes import Redis


class FreezingProxy:
    """A TCP proxy to Redis whose open connections can be frozen: they stay open but carry
    nothing more either way. Connections made after a freeze pass normally."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.accepted = 0
        self._frozen: set[asyncio.Event] = set()
        self._live: set[asyncio.Event] = set()
        self.port = 0

    async def start(self) -> FreezingProxy:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._server = server
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        frozen = asyncio.Event()
        self._live.add(frozen)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while not frozen.is_set():
                data = await src.read(65536)
                if not data or frozen.is_set():
                    break
                dst.write(data)
                await dst.drain()
            if frozen.is_set():
                await asyncio.Event().wait()  # held open, silent, until the test ends
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    async def freeze(self) -> None:
        for frozen in self._live:
            frozen.set()
        self._live.clear()

    async def stop(self) -> None:
        self._server.close()


@pytest.fixture
def cluster(tmp_path):
    def through_proxy(loop: LoopThread, redis: Redis, cleanups: list) -> dict[str, int]:
        proxy = loop.call(FreezingProxy(redis.port).start())
        cleanups.append(lambda: loop.call(proxy.stop()))
        proxies.append(proxy)
        return {"a": proxy.port}  # node a reaches Redis through the proxy

    proxies: list[FreezingProxy] = []
    with running_cluster(tmp_path, redis_ports=through_proxy) as cluster:
        yield {**cluster, "proxy": proxies[0]}


def test_a_node_whose_redis_connection_goes_silent_reconnects_and_agrees_again(cluster) -> None:
    loop, proxy, node_a = cluster["loop"], cluster["proxy"], cluster["nodes"]["a"]
    all_nodes(cluster, lambda a: a == {"127.0.0.71", "127.0.0.72"}, 10)
    connections = proxy.accepted
    loop.call(proxy.freeze())  # a's connections now carry nothing, and nothing closes them
    loop.call(cluster["backends"]["b2"].set_mode("503"))  # b and c see b2 fail, and a itself
    started = time.monotonic()
    took = all_nodes(cluster, lambda a: a == {"127.0.0.71"}, 2 * SILENT_S + 10)
    node_a.wait_for_log("went silent")
    assert proxy.accepted > connections, "node a never opened a new connection"
    assert took <= 2 * SILENT_S + 10, time.monotonic() - started
