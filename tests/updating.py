"""A `dnsd serve` that takes RFC 2136 UPDATEs, for the end-to-end tests of dynamic update:
the repository's zones with `example.test` granting two TSIG keys, UPDATEs signed with
them, and the real clients (`nsupdate`, `knsupdate`, `dig`) run against it."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.name
import dns.tsig
import dns.update

from tests.processes import DnsdProcess

ROOT = Path(__file__).parent.parent
TOKEN = "update-test-token"
GRANTS = """
update:
  - key: acme
    names: ["_acme-challenge", "_acme-challenge.*"]
    types: [TXT]
  - key: ops
    names: ["*.dyn", "@"]
    types: [A, TXT, NS]
"""


@dataclass
class Served:
    dnsd: DnsdProcess
    config: Path
    secret: str  # the `acme` key's
    ops: str  # the `ops` key's
    stranger: str  # a key defined in tsig_keys that no zone grants

    def files(self) -> dict[str, str]:
        return {p.name: p.read_text() for p in sorted(self.config.glob("*.yaml"))}


def secret() -> str:
    return base64.b64encode(os.urandom(32)).decode()


@contextlib.contextmanager
def serving(tmp: Path) -> Iterator[Served]:
    """A `dnsd serve` of the repository's zones with `example.test` granting GRANTS."""
    config = tmp / "zones"
    shutil.copytree(ROOT / "zones", config)
    keys = {"acme": secret(), "ops": secret(), "stranger": secret()}
    lines = ["tsig_keys:"]
    for name, value in keys.items():
        (config / f"{name}.b64").write_text(value + "\n")
        lines.append(f"  {name}: {{algorithm: hmac-sha256, secret_file: {name}.b64}}")
    (config / "keys.yaml").write_text("\n".join(lines) + "\n")
    with open(config / "example.test.yaml", "a") as handle:
        handle.write(GRANTS)
    env = {"DNSD_ADMIN_TOKEN": TOKEN}
    with DnsdProcess(config, "--state-dir", str(tmp / "state"), env=env) as dnsd:
        yield Served(dnsd, config, keys["acme"], keys["ops"], keys["stranger"])


def signed(served: Served, key: str = "acme") -> dns.update.UpdateMessage:
    secret = served.secret if key == "acme" else served.ops
    ring = {dns.name.from_text(key): dns.tsig.Key(key, secret, dns.tsig.HMAC_SHA256)}
    return dns.update.UpdateMessage("example.test.", keyring=ring, keyname=key)


def nsupdate(
    port: int,
    commands: str,
    key: str | None = None,
    tcp: bool = False,
    zone: str = "example.test",
    source_port: int | None = None,  # UDP only: nsupdate fails to connect from one
) -> str:
    local = f"local 127.0.0.1 {source_port}\n" if source_port else ""
    script = f"server 127.0.0.1 {port}\n{local}zone {zone}\n{commands}\nsend\n"
    argv = ["nsupdate", "-t", "5", *(["-v"] if tcp else []), *(["-y", key] if key else [])]
    done = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=30)
    return f"rc={done.returncode} {done.stdout} {done.stderr}"


def knsupdate(
    port: int, commands: str, key: str, tcp: bool = False, source_port: int | None = None
) -> str:
    local = f"local 127.0.0.1 {source_port}\n" if source_port else ""
    script = f"server 127.0.0.1 {port}\n{local}zone example.test.\n{commands}\nsend\nquit\n"
    argv = ["knsupdate", "-t", "5", *(["-v"] if tcp else []), "-y", key]
    done = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=30)
    return f"rc={done.returncode} {done.stdout} {done.stderr}"


def dig(port: int, name: str, qtype: str) -> list[str]:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), "+short", "+time=2", "+tries=1", name, qtype],
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout
    return sorted(out.split("\n")[:-1])


def status(port: int, name: str, qtype: str) -> str:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), "+time=2", "+tries=1", name, qtype],
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout
    return out.split("status: ", 1)[1].split(",", 1)[0]
