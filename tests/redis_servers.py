"""Real redis-server processes for the production-Redis tests: a server with any extra
settings (TLS, ACL users, a replica of another), and sentinels (`redis-server --sentinel`).
Each runs on a free loopback port in its own temp directory and is killed at the end."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from dnsd.drill.ports import free_port_pair


class RedisServer:
    def __init__(
        self, workdir: Path, *settings: str, tls: bool = False, cli: tuple[str, ...] = ()
    ) -> None:
        """`settings`: redis.conf lines. With `tls`, the port speaks TLS only; `cli`: what
        redis-cli needs besides the port (--tls --cacert FILE, --user, --pass)."""
        self.port = free_port_pair()
        self.cli_extra = list(cli)
        self.dir = workdir / f"redis-{self.port}"
        self.dir.mkdir(parents=True)
        self.settings = list(settings)
        self.tls = tls
        self.proc: subprocess.Popen[bytes] | None = None

    def conf_lines(self) -> list[str]:
        listen = ["port 0", f"tls-port {self.port}"] if self.tls else [f"port {self.port}"]
        return [*listen, "bind 127.0.0.1", f'dir "{self.dir}"', 'save ""', "appendonly no",
                *self.settings]  # fmt: skip

    def start(self, sentinel: bool = False) -> RedisServer:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is installed by `make test` (Debian package redis-server)"
        conf = self.dir / "redis.conf"
        conf.write_text("\n".join(self.conf_lines()) + "\n")
        argv = [binary, str(conf), *(["--sentinel"] if sentinel else [])]
        self.proc = subprocess.Popen(argv, stdout=(self.dir / "log").open("ab"),
                                     stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 10
        while not self.answers():
            assert self.proc.poll() is None, (self.dir / "log").read_text()[-2000:]
            assert time.monotonic() < deadline, (self.dir / "log").read_text()[-2000:]
            time.sleep(0.05)
        return self

    def cli_args(self) -> list[str]:
        return ["redis-cli", "-p", str(self.port), "--no-auth-warning", *self.cli_extra]

    def answers(self) -> bool:
        done = subprocess.run([*self.cli_args(), "ping"], capture_output=True, text=True)
        return done.stdout.strip() in ("PONG",) or "NOAUTH" in done.stdout + done.stderr

    def cli(self, *args: str) -> str:
        done = subprocess.run([*self.cli_args(), *args], check=True, capture_output=True, text=True)
        return done.stdout

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class SentinelServer(RedisServer):
    def __init__(self, workdir: Path, service: str, primary_port: int) -> None:
        super().__init__(
            workdir,
            f"sentinel monitor {service} 127.0.0.1 {primary_port} 2",
            f"sentinel down-after-milliseconds {service} 1000",
            f"sentinel failover-timeout {service} 5000",
            f"sentinel parallel-syncs {service} 1",
        )

    def conf_lines(self) -> list[str]:
        return [f"port {self.port}", "bind 127.0.0.1", f'dir "{self.dir}"', *self.settings]

    def start(self, sentinel: bool = True) -> RedisServer:
        return super().start(sentinel=True)

    def primary(self, service: str) -> int | None:
        out = self.cli("sentinel", "get-master-addr-by-name", service).split()
        return int(out[1]) if len(out) == 2 else None
