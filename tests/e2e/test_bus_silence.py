"""A node whose Redis connection dies without closing — a route dropped, a peer frozen: the
client only ever reads "no message" — notices the silence, reconnects and agrees with the
others again (the health bus's watchdog, dnsd.health.bus.SILENT_S)."""

from __future__ import annotations

import asyncio
import time

import pytest

from dnsd.drill.backend import DemoBackend
from dnsd.health.bus import SILENT_S
from tests.e2e.test_multinode import ADDRESSES, CLUSTER_KEY, all_nodes, config, start_nodes
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess, Redis


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
    loop = LoopThread()
    backends = {
        n: loop.call(DemoBackend(n, host=a, control_port=None).start())
        for n, a in ADDRESSES.items()
    }
    (tmp_path / "zones").mkdir()
    (tmp_path / "zones" / "mn.yaml").write_text(config({n: b.port for n, b in backends.items()}))
    (tmp_path / "cluster.key").write_text(CLUSTER_KEY)
    redis = Redis().start()
    proxy = loop.call(FreezingProxy(redis.port).start())
    nodes: dict[str, DnsdProcess] = {}
    try:  # node a reaches Redis through the proxy
        start_nodes(nodes, tmp_path, {"a": proxy.port, "b": redis.port, "c": redis.port})
        yield {"loop": loop, "backends": backends, "nodes": nodes, "proxy": proxy}
    finally:
        for proc in nodes.values():
            proc.stop()
        loop.call(proxy.stop())
        redis.kill()
        for b in backends.values():
            loop.call(b.stop())
        loop.close()


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
