"""Shared fixtures: a real dnsd server on 127.0.0.1 (random port) in a background thread."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dnsd.geo.database import GeoDatabase
from dnsd.loading import load_snapshot
from dnsd.net.rrl import RrlSettings
from dnsd.net.tcp import TcpLimits
from dnsd.server import DnsServer, ServerOptions
from tests import longest_first

DATA = Path(__file__).parent / "data"
GEO = GeoDatabase()
NO_RRL = RrlSettings(rate=0.0)  # the embedded database, as `dnsd serve` uses by default


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    longest_first.order(items)  # the minutes-long files start first (tests/longest_first.py)


class ServerThread:
    """Runs a DnsServer on its own event loop so tests can use blocking sockets."""

    def __init__(
        self,
        config_dir: Path,
        tcp_limits: TcpLimits | None = None,
        admin_token: str | None = None,
        state_dir: Path | None = None,
        rrl: RrlSettings | None = None,
        serving_loop: str = "auto",
    ) -> None:
        """Production defaults (`dnsd serve`'s UDP loop, answer cache and rate limiting);
        a test that sends many identical queries from 127.0.0.1 passes NO_RRL, as an
        operator load-testing a node would pass --rrl-rate 0."""
        self.config_dir = config_dir
        self.loop = asyncio.new_event_loop()
        options = ServerOptions(
            config_dir=config_dir,
            listen=(("127.0.0.1", 0),),
            tcp_limits=tcp_limits or TcpLimits(),
            admin=("127.0.0.1", 0),
            admin_token=admin_token,
            state_dir=state_dir,
            rrl=rrl or RrlSettings(),
            serving_loop=serving_loop,
        )
        self.server = DnsServer(options, load_snapshot(config_dir, 1, GEO))
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def run_loop(self) -> None:
        """Run the event loop only: a test that needs it before the server starts."""
        self._thread.start()

    def start(self) -> ServerThread:
        self.run_loop()
        self.call(self.server.start())
        return self

    def call(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=10)

    @property
    def port(self) -> int:
        return self.server.bound[0][1]

    @property
    def admin_port(self) -> int:
        assert self.server.admin_bound is not None
        return self.server.admin_bound[1]

    def reload(self) -> bool:
        return bool(self.call(self.server.reload()).ok)

    def stop(self) -> None:
        self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    srv = ServerThread(DATA / "good").start()
    yield srv
    srv.stop()


@pytest.fixture
def config_copy(tmp_path: Path) -> Path:
    """A writable copy of the good test config."""
    target = tmp_path / "zones"
    shutil.copytree(DATA / "good", target)
    return target


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A UDP server socket and a client socket on 127.0.0.1 (the compiled loop's batch tests)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.bind(("127.0.0.1", 0))
    client.settimeout(2.0)
    yield server, client
    server.close()
    client.close()
