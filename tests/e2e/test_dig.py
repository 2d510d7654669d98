"""`dig` (Debian dnsutils) against `dnsd serve zones/`: what a user sees first."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.processes import DnsdProcess

ZONES = "zones"


@pytest.fixture(scope="module")
def dnsd():
    assert shutil.which("dig"), "dig is installed by `make test` (Debian dnsutils)"
    with DnsdProcess(ZONES) as proc:
        yield proc


def dig(port: int, *args: str) -> str:
    cmd = ["dig", "@127.0.0.1", "-p", str(port), "+tries=1", "+time=2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout


@pytest.mark.parametrize("transport", ["+notcp", "+tcp"])
def test_dig_gets_authoritative_answers(dnsd, transport: str) -> None:
    out = dig(dnsd.port, "www.example.test", transport)
    assert "status: NOERROR" in out
    assert "flags: qr aa rd;" in out  # AA set, RA clear
    assert "www.example.test.\t30\tIN\tA\t192.0.2." in out


def test_dig_short_answers(dnsd) -> None:
    assert dig(dnsd.port, "+short", "mail.example.test", "AAAA").strip() == "2001:db8::25"
    cname, address = dig(dnsd.port, "+short", "docs.example.test").split()
    assert cname == "www.example.test." and address in {"192.0.2.10", "192.0.2.11"}
    assert dig(dnsd.port, "+short", "-x", "192.0.2.53").strip() == "ns1.example.test."
    assert dig(dnsd.port, "+short", "x.apps.example.test").strip() == "192.0.2.99"


def test_dig_negative_answers(dnsd) -> None:
    out = dig(dnsd.port, "nope.mail.example.test")
    assert "status: NXDOMAIN" in out and "flags: qr aa rd;" in out
    assert "example.test.\t\t300\tIN\tSOA" in out
    out = dig(dnsd.port, "example.org")
    assert "status: REFUSED" in out


def test_dig_referral(dnsd) -> None:
    out = dig(dnsd.port, "host.sub.example.test", "+norec")
    assert "flags: qr;" in out  # no AA on a referral
    assert "sub.example.test.\t3600\tIN\tNS\tns.sub.example.test." in out
    assert "ns.sub.example.test.\t3600\tIN\tA\t192.0.2.100" in out
