"""Real processes for end-to-end tests: `dnsd serve` (the drill runner's own class) and
redis-server."""

from __future__ import annotations

import shutil
import subprocess
import time

from dnsd.drill.ports import free_port_pair
from dnsd.drill.process import DnsdProcess

__all__ = ["DnsdProcess", "Redis"]


class Redis:
    def __init__(self) -> None:
        self.port = free_port_pair()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Redis:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is installed by `make test` (Debian package redis-server)"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while (
            subprocess.run(
                ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True
            ).stdout.strip()
            != "PONG"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return self

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], check=True, capture_output=True, text=True
        )
        return done.stdout

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
