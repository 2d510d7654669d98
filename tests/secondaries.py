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


class _KnotServer(_Server):
    name = "knotd"

    def write_config(self, sections: str, template: str, zones: list[str]) -> None:
        """knot.conf: listen on our port, keep everything in our directory."""
        (self.dir / "knot.conf").write_text(
            f"server:\n    rundir: {self.dir}\n    listen: 127.0.0.1@{self.port}\n"
            f"database:\n    storage: {self.dir}\n{sections}"
            f"template:\n  - id: default\n    storage: {self.dir}\n    zonefile-sync: -1\n"
            f"    journal-content: none\n{template}zone:\n" + "\n".join(zones) + "\n"
        )

    def command(self) -> list[str]:
        return [_binary("knotd"), "-c", str(self.dir / "knot.conf")]


class Knot(_KnotServer):
    """knotd as a secondary of `primary_port` for `zones`, with TSIG key (name, base64)."""

    def __init__(
        self, workdir: Path, primary_port: int, zones: list[str], key: tuple[str, str],
        serve_transfers: bool = False,
    ) -> None:  # fmt: skip
        """`serve_transfers`: let 127.0.0.1 AXFR the zones from this secondary too (so a
        test can read back exactly what it received)."""
        super().__init__(workdir)
        key_name, secret = key
        acls = "[notify_from_primary, transfer_out]" if serve_transfers else "notify_from_primary"
        self.write_config(
            "log:\n  - target: stdout\n    any: info\n"
            f"key:\n  - id: {key_name}\n    algorithm: hmac-sha256\n    secret: {secret}\n"
            f"remote:\n  - id: primary\n    address: 127.0.0.1@{primary_port}\n"
            f"    key: {key_name}\n"
            f"acl:\n  - id: notify_from_primary\n    address: 127.0.0.1\n    key: {key_name}\n"
            "    action: notify\n"
            "  - id: transfer_out\n    address: 127.0.0.1\n    action: transfer\n",
            "    zonefile-load: none\n",
            [f"  - domain: {z}\n    master: primary\n    acl: {acls}" for z in zones],
        )


class KnotCatalog(_KnotServer):
    """knotd as a secondary of `primary_port` for one catalog zone only, with
    `catalog-role: interpret` (RFC 9432): every member zone it finds there it adds by
    itself, from the same primary (the `member` template), and drops when it leaves."""

    def __init__(
        self, workdir: Path, primary_port: int, catalog: str, key: tuple[str, str]
    ) -> None:
        super().__init__(workdir)
        key_name, secret = key
        self.write_config(
            "log:\n  - target: stdout\n    any: info\n"
            f"key:\n  - id: {key_name}\n    algorithm: hmac-sha256\n    secret: {secret}\n"
            f"remote:\n  - id: primary\n    address: 127.0.0.1@{primary_port}\n"
            f"    key: {key_name}\n"
            f"acl:\n  - id: notify_from_primary\n    address: 127.0.0.1\n    key: {key_name}\n"
            "    action: notify\n",
            "    zonefile-load: none\n"
            f"  - id: member\n    storage: {self.dir}\n    zonefile-sync: -1\n"
            "    journal-content: none\n    zonefile-load: none\n    master: primary\n"
            "    acl: notify_from_primary\n",
            [f"  - domain: {catalog}\n    master: primary\n    acl: notify_from_primary\n"
             "    catalog-role: interpret\n    catalog-template: member"],
        )  # fmt: skip


class BindCatalog(_Server):
    """BIND 9 (`named`) as a secondary of `primary_port` for one catalog zone, with
    `catalog-zones` (RFC 9432): it adds every member zone by itself from the same primary."""

    name = "named"

    def __init__(
        self, workdir: Path, primary_port: int, catalog: str, key: tuple[str, str]
    ) -> None:
        super().__init__(workdir)
        key_name, secret = key
        primary = f"127.0.0.1 port {primary_port} key {key_name};"
        (self.dir / "named.conf").write_text(
            f"""options {{
    directory "{self.dir}";
    pid-file "{self.dir}/named.pid";
    session-keyfile "{self.dir}/session.key";
    managed-keys-directory "{self.dir}";
    listen-on port {self.port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    allow-new-zones yes;
    notify no;
    catalog-zones {{
        zone "{catalog}" default-primaries {{ {primary} }} in-memory yes;
    }};
}};
key "{key_name}" {{ algorithm hmac-sha256; secret "{secret}"; }};
controls {{ }};
zone "{catalog}" {{ type secondary; file "catalog.db"; primaries {{ {primary} }}; }};
"""
        )

    def command(self) -> list[str]:
        return [_binary("named"), "-g", "-c", str(self.dir / "named.conf")]


class KnotPrimary(_KnotServer):
    """knotd serving RFC 1035 zone files as a primary (the differential test's peer)."""

    def __init__(self, workdir: Path, zones: dict[str, Path]) -> None:
        super().__init__(workdir)
        self.write_config(
            "",
            "    semantic-checks: off\n",
            [f"  - domain: {z}\n    file: {path}" for z, path in zones.items()],
        )


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
