"""The serving options a default `dnsd serve` never takes, each run as production runs it
(`python -m dnsd serve`) and asked with `dig` over UDP and TCP: the event loop's UDP
(`--udp-loop asyncio`), every query the long way (`--no-answer-cache`), and the one-datagram
loop of platforms without recvmmsg (recvfrom/sendto)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.processes import DnsdProcess

ZONES = "zones"
# A platform without recvmmsg/sendmmsg (macOS, the BSDs): the libc handle cleared before
# the server starts, as dnsd.net.mmsg leaves it when the symbols are missing.
NO_RECVMMSG = (
    "import sys, dnsd.net.mmsg as m; m._LIBC = None; "
    "from dnsd.cli import main; sys.exit(main(sys.argv[1:]))"
)
VARIANTS = {
    "udp-loop-asyncio": (["--udp-loop", "asyncio"], "udp loop: asyncio"),
    "no-answer-cache": (["--no-answer-cache"], "no answer cache"),
    "recvfrom-loop": ([], "one recvfrom and one sendto per datagram"),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def dnsd(request: pytest.FixtureRequest):
    assert shutil.which("dig"), "dig is installed by `make test` (Debian dnsutils)"
    flags, _ = VARIANTS[request.param]
    proc = DnsdProcess(ZONES, *flags, "--rrl-rate", "0")
    if request.param == "recvfrom-loop":
        assert proc.args[1:3] == ["-m", "dnsd"]
        proc.args[1:3] = ["-c", NO_RECVMMSG]
    with proc:
        yield request.param, proc


def dig(port: int, *args: str) -> str:
    cmd = ["dig", "@127.0.0.1", "-p", str(port), "+tries=1", "+time=2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout


def test_the_option_is_the_one_that_serves(dnsd) -> None:
    name, proc = dnsd
    assert VARIANTS[name][1] in proc.output, proc.output


@pytest.mark.parametrize("transport", ["+notcp", "+tcp"])
def test_answers_static_negative_and_load_balanced_names(dnsd, transport: str) -> None:
    _, proc = dnsd
    for _ in range(3):  # again and again: a cache (when there is one) answers the repeats
        out = dig(proc.port, "www.example.test", transport)
        assert "status: NOERROR" in out and "flags: qr aa rd;" in out, out
        assert "www.example.test.\t30\tIN\tA\t192.0.2." in out
        assert dig(proc.port, "+short", "mail.example.test", "AAAA", transport).strip() == (
            "2001:db8::25"
        )
        out = dig(proc.port, "nope.mail.example.test", transport)
        assert "status: NXDOMAIN" in out and "example.test.\t\t300\tIN\tSOA" in out
        assert "status: REFUSED" in dig(proc.port, "example.org", transport)
        # A load-balanced name (zones/example.net.yaml): an address from one of its pools.
        lb = dig(proc.port, "+short", "active-active.example.net", transport).split()
        assert lb and all(line[0].isdigit() or line.endswith(".") for line in lb), lb


def test_an_ecs_query_is_answered_with_its_scope(dnsd) -> None:
    _, proc = dnsd
    out = dig(proc.port, "active-active.example.net", "+subnet=81.2.69.0/24")
    assert "status: NOERROR" in out and "CLIENT-SUBNET: 81.2.69.0/24/" in out, out
