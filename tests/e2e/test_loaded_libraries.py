"""A server loads only the libraries its configuration uses: with the admin API off and no
health checks, `dnsd serve` maps no HTTP library (aiohttp, ~15 MiB resident); with no signed
zone, no DNSSEC crypto (`cryptography`). Each is loaded once something needs it: the admin
API (the CLI default), a signed zone."""

from __future__ import annotations

from pathlib import Path

from dnsd.drill.process import DnsdProcess
from tests.dnsclient import ask

ZONE = """zone: {name}
ttl: 300
soa: {{mname: ns1.{name}., rname: hostmaster.{name}., serial: 1, minimum: 60}}
records:
  "@": {{NS: [ns1.{name}.]}}
  ns1: {{A: 192.0.2.53}}
  www: {{A: 192.0.2.1}}
"""
PLAIN = ZONE.format(name="plain.test")
SIGNED = ZONE.format(name="signed.test") + "dnssec: {algorithm: 13}\n"


def mapped(pid: int) -> str:
    """The files the process has mapped (its loaded C extensions among them)."""
    return Path(f"/proc/{pid}/maps").read_text()


def serve_and_look(config: Path, *extra: str) -> str:
    with DnsdProcess(config, *extra) as proc:
        assert proc.proc is not None
        assert ask(proc.port, "www.plain.test", "A").rr[0].rdata.toZone() == "192.0.2.1"
        return mapped(proc.proc.pid)


def test_a_plain_zone_without_the_admin_api_loads_neither_http_nor_crypto(tmp_path: Path) -> None:
    (tmp_path / "plain.yaml").write_text(PLAIN)
    maps = serve_and_look(tmp_path, "--admin", "off")
    assert "/aiohttp/" not in maps
    assert "/cryptography/" not in maps


def test_the_admin_api_and_a_signed_zone_load_what_they_need(tmp_path: Path) -> None:
    (tmp_path / "plain.yaml").write_text(PLAIN)
    (tmp_path / "signed.yaml").write_text(SIGNED)
    maps = serve_and_look(tmp_path)  # the CLI's defaults: the admin API on
    assert "/aiohttp/" in maps
    assert "/cryptography/" in maps
