"""Real secondary servers for transfer tests: Knot DNS (`knotd`) and NSD, from Debian's
packages, configured to pull zones from a primary with a TSIG key and to take its NOTIFY.
Each runs in the foreground on a free loopback port inside its own temporary directory.
Knot also serves plain zone files (`KnotPrimary`) for the differential tests."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from dnsd.drill.ports import free_port_pair


class _Server:
    name = ""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port_pair()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "server.log"

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> _Server:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.log.read_text()}")
            time.sleep(0.05)
        return self

    def _answers(self) -> bool:
        done = subprocess.run(
            ["dig", "@127.0.0.1", "-p", str(self.port), "+time=1", "+tries=1", "version.bind",
             "CH", "TXT"],
            capture_output=True, text=True,
        )  # fmt: skip
        return "status:" in done.stdout

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> _Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _binary(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    assert found, f"{name} is installed by `make test` (scripts/install-test-deps.sh)"
    return found


class Knot(_Server):
    """knotd as a secondary of `primary_port` for `zones`, with TSIG key (name, base64)."""

    name = "knotd"

    def __init__(
        self, workdir: Path, primary_port: int, zones: list[str], key: tuple[str, str]
    ) -> None:
        super().__init__(workdir)
        key_name, secret = key
        zone_lines = "\n".join(
            f"  - domain: {z}\n    master: primary\n    acl: notify_from_primary" for z in zones
        )
        (self.dir / "knot.conf").write_text(
            f"""server:
    rundir: {self.dir}
    listen: 127.0.0.1@{self.port}
log:
  - target: stdout
    any: info
database:
    storage: {self.dir}
key:
  - id: {key_name}
    algorithm: hmac-sha256
    secret: {secret}
remote:
  - id: primary
    address: 127.0.0.1@{primary_port}
    key: {key_name}
acl:
  - id: notify_from_primary
    address: 127.0.0.1
    key: {key_name}
    action: notify
template:
  - id: default
    storage: {self.dir}
    zonefile-sync: -1
    zonefile-load: none
    journal-content: none
zone:
{zone_lines}
"""
        )

    def command(self) -> list[str]:
        return [_binary("knotd"), "-c", str(self.dir / "knot.conf")]


class KnotPrimary(_Server):
    """knotd serving RFC 1035 zone files as a primary (the differential test's peer)."""

    name = "knotd"

    def __init__(self, workdir: Path, zones: dict[str, Path]) -> None:
        super().__init__(workdir)
        zone_lines = "\n".join(f"  - domain: {z}\n    file: {path}" for z, path in zones.items())
        (self.dir / "knot.conf").write_text(
            f"""server:
    rundir: {self.dir}
    listen: 127.0.0.1@{self.port}
database:
    storage: {self.dir}
template:
  - id: default
    storage: {self.dir}
    zonefile-sync: -1
    journal-content: none
    semantic-checks: off
zone:
{zone_lines}
"""
        )

    def command(self) -> list[str]:
        return [_binary("knotd"), "-c", str(self.dir / "knot.conf")]


class Nsd(_Server):
    """NSD as a secondary of `primary_port` for `zones`, with TSIG key (name, base64)."""

    name = "nsd"

    def __init__(
        self, workdir: Path, primary_port: int, zones: list[str], key: tuple[str, str]
    ) -> None:
        super().__init__(workdir)
        key_name, secret = key
        zone_lines = "\n".join(
            f"""zone:
    name: {z}
    zonefile: {z}zone
    request-xfr: 127.0.0.1@{primary_port} {key_name}
    allow-notify: 127.0.0.1 {key_name}
"""
            for z in zones
        )
        (self.dir / "nsd.conf").write_text(
            f"""server:
    ip-address: 127.0.0.1@{self.port}
    port: {self.port}
    username: ""
    zonesdir: {self.dir}
    database: ""
    pidfile: {self.dir}/nsd.pid
    xfrdfile: {self.dir}/xfrd.state
    zonelistfile: {self.dir}/zone.list
    xfrdir: {self.dir}
    verbosity: 2
    tcp-count: 16
remote-control:
    control-enable: no
key:
    name: {key_name}
    algorithm: hmac-sha256
    secret: "{secret}"
{zone_lines}"""
        )

    def command(self) -> list[str]:
        return [_binary("nsd"), "-d", "-c", str(self.dir / "nsd.conf")]
