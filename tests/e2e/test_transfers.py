"""Zone transfers to real secondaries: Knot and NSD pull every bundled zone from
`dnsd serve` with a TSIG key, follow its NOTIFY after a reload and after a failover, and
an unsigned or outside transfer is refused; a stopped secondary is logged, and its return.
kdig is the transfer client."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dnsd.drill.ports import free_port_pair
from tests.admin_client import http
from tests.processes import DnsdProcess
from tests.secondaries import Knot, Nsd

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parent.parent.parent
ZONES = ["example.test.", "example.net.", "2.0.192.in-addr.arpa."]
TOKEN = "transfer-test-token"


@dataclass
class Setup:
    dnsd: DnsdProcess
    knot: Knot
    nsd: Nsd
    config: Path
    secret: str
    state: Path


def kdig(port: int, *args: str, key: str | None = None, source: str | None = None) -> str:
    argv = ["kdig", "@127.0.0.1", "-p", str(port), "+time=2", "+retry=0", *args]
    if key:
        argv += ["-y", f"hmac-sha256:xfr-key:{key}"]
    if source:
        argv += ["-b", source]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    return done.stdout + done.stderr  # kdig reports a refused transfer on stderr


def records(text: str) -> set[str]:
    """Record lines of kdig or zone-file output, normalised: name TTL class type data."""
    out = set()
    for line in text.splitlines():
        if not line.strip() or line.startswith((";", "$")):
            continue
        fields = line.split()
        if len(fields) >= 4 and fields[3] == "TSIG":
            continue
        out.add(" ".join(fields))
    return out


def export(config: Path, zone: str, state: Path) -> set[str]:
    """`dnsd export` as record lines with absolute names (as kdig prints them)."""
    import dns.zone

    argv = [
        "python3",
        "-m",
        "dnsd",
        "export",
        zone,
        "--dir",
        str(config),
        "--state-dir",
        str(state),
    ]
    text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    parsed = dns.zone.from_text(text, origin=zone, relativize=False, check_origin=False)
    return {
        f"{name} {ttl} IN {rdata.rdtype.name} {rdata.to_text()}"
        for name, ttl, rdata in parsed.iterate_rdatas()
    }


def soa_serial(port: int, zone: str) -> int | None:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), "+short", "+time=1", "+tries=1", zone, "SOA"],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return int(out[2]) if len(out) >= 3 and out[2].isdigit() else None


def short(port: int, name: str, qtype: str = "A") -> list[str]:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), "+short", "+time=1", "+tries=1", name, qtype],
        capture_output=True, text=True,
    ).stdout  # fmt: skip
    return sorted(out.split())


def wait_for(check: object, timeout: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():  # type: ignore[operator]
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout}s")


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    secret = base64.b64encode(os.urandom(32)).decode()
    config = tmp_path / "zones"
    shutil.copytree(ROOT / "zones", config)
    (config / "xfr.b64").write_text(secret + "\n")
    (config / "keys.yaml").write_text(
        "tsig_keys:\n  xfr-key: {algorithm: hmac-sha256, secret_file: xfr.b64}\n"
    )
    port = free_port_pair()
    knot = Knot(tmp_path / "knot", port, ZONES, ("xfr-key", secret))
    nsd = Nsd(tmp_path / "nsd", port, ZONES, ("xfr-key", secret))
    for path in config.glob("*.yaml"):
        if path.name == "keys.yaml":
            continue
        with open(path, "a") as handle:
            handle.write(
                "\ntransfer:\n  allow: [127.0.0.1/32]\n  keys: [xfr-key]\n"
                f'notify: ["127.0.0.1:{knot.port}", "127.0.0.1:{nsd.port}"]\n'
            )
    state = tmp_path / "state"
    env = {"DNSD_ADMIN_TOKEN": TOKEN}
    with (
        DnsdProcess(config, "--state-dir", str(state), listen=f"127.0.0.1:{port}", env=env) as dnsd,
        knot,
        nsd,
    ):
        yield Setup(dnsd, knot, nsd, config, secret, state)


def test_secondaries_transfer_every_zone_and_follow_reloads_and_failover(setup: Setup) -> None:
    dnsd, knot, nsd = setup.dnsd, setup.knot, setup.nsd
    # Every bundled zone arrives at both secondaries, with dnsd's serial; a signed AXFR
    # holds exactly what `dnsd export` prints.
    for zone in ZONES:
        serial = soa_serial(dnsd.port, zone)
        assert serial is not None
        for secondary in (knot, nsd):
            wait_for(lambda s=secondary, z=zone, n=serial: soa_serial(s.port, z) == n, 15,
                     f"{secondary.name} has {zone} at serial {serial}")  # fmt: skip
        axfr = records(kdig(dnsd.port, "AXFR", zone, key=setup.secret))
        assert axfr == export(setup.config, zone, setup.state)
    assert short(knot.port, "mail.example.test.") == ["192.0.2.25"]
    assert short(nsd.port, "ns.sub.example.test.") == []  # below a delegation: a referral
    assert short(nsd.port, "docs.example.test.", "CNAME") == ["www.example.test."]

    # A reload that changes a zone: the NOTIFY makes both serve the new data within 2 s.
    path = setup.config / "example.test.yaml"
    path.write_text(
        path.read_text().replace("records:\n", "records:\n  fresh: {A: 192.0.2.201}\n", 1)
    )
    before = soa_serial(dnsd.port, "example.test.")
    status, body = http(dnsd.admin_port, "POST", "/api/v1/reload", token=TOKEN)
    assert status == 200, body
    after = soa_serial(dnsd.port, "example.test.")
    assert before is not None and after is not None and after > before
    for secondary in (knot, nsd):
        wait_for(lambda s=secondary: short(s.port, "fresh.example.test.") == ["192.0.2.201"],
                 2.0, f"{secondary.name} serves the reloaded record")  # fmt: skip

    # A failover: us-east goes down, the transferred answer for www moves to eu-west and
    # both secondaries serve it (IXFR from the journal, or AXFR).
    eu_west = {"198.51.100.10", "198.51.100.11"}
    status, body = http(dnsd.admin_port, "PUT", "/api/v1/overrides/pools/us-east",
                        {"state": "down"}, token=TOKEN)  # fmt: skip
    assert status == 200, body
    wait_for(lambda: www(kdig(dnsd.port, "AXFR", "example.test.", key=setup.secret)) <= eu_west,
             2.0, "the transferred www answer moves to eu-west")  # fmt: skip
    moved = www(kdig(dnsd.port, "AXFR", "example.test.", key=setup.secret))
    assert moved and moved <= eu_west
    for secondary in (knot, nsd):
        wait_for(lambda s=secondary: set(short(s.port, "www.example.test.")) == moved, 3.0,
                 f"{secondary.name} serves the failover answer")  # fmt: skip
    assert "IXFR" in dnsd.output or "AXFR" in dnsd.output


def www(axfr: str) -> set[str]:
    return {
        f.split()[4] for f in records(axfr) if f.startswith("www.example.test. ") and " A " in f
    }


def test_transfer_without_the_key_or_from_outside_is_refused(setup: Setup) -> None:
    port = setup.dnsd.port
    unsigned = kdig(port, "AXFR", "example.test.")
    assert "NOTAUTH" in unsigned and "SOA" not in unsigned.split("AXFR")[-1]
    wrong = kdig(port, "AXFR", "example.test.", key=base64.b64encode(os.urandom(32)).decode())
    assert "BADSIG" in wrong or "NOTAUTH" in wrong
    outside = kdig(port, "AXFR", "example.test.", key=setup.secret, source="127.0.0.2")
    assert "REFUSED" in outside
    unknown = kdig(port, "AXFR", "nowhere.example.", key=setup.secret)
    assert "NOTAUTH" in unknown
    signed = kdig(port, "AXFR", "example.test.", key=setup.secret)
    assert "IN\tSOA" in signed.replace(" ", "\t") or " SOA " in signed
    assert "no TSIG (transfer.keys requires one)" in setup.dnsd.output
    assert "is not in transfer.allow" in setup.dnsd.output


def test_ixfr_sends_the_difference_and_old_serials_get_the_whole_zone(setup: Setup) -> None:
    port, zone = setup.dnsd.port, "example.test."
    first = soa_serial(port, zone)
    assert first is not None
    status, _ = http(setup.dnsd.admin_port, "PUT", "/api/v1/overrides/pools/us-east",
                     {"state": "down"}, token=TOKEN)  # fmt: skip
    assert status == 200
    wait_for(lambda: soa_serial(port, zone) != first, 2.0, "a new serial after the failover")
    now = soa_serial(port, zone)
    diff = kdig(port, f"IXFR={first}", zone, key=setup.secret)
    lines = records(diff)
    assert any(" SOA " in line and f" {first} " in line for line in lines)  # the old SOA
    assert any(line.startswith("www.example.test. ") for line in lines)
    assert not any(line.startswith("mail.example.test. ") for line in lines)  # unchanged
    full = records(kdig(port, "IXFR=1", zone, key=setup.secret))  # not in the journal
    assert full == export(setup.config, zone, setup.state)  # the whole zone, as exported
    current = records(kdig(port, f"IXFR={now}", zone, key=setup.secret))
    assert len(current) == 1 and " SOA " in next(iter(current))


def test_a_stopped_secondary_is_logged_and_its_return_too(setup: Setup) -> None:
    """Knot stops: the next change's NOTIFY to it is logged within seconds (NSD, answering,
    is not); Knot starts again: the next NOTIFY says it answers again, and it follows."""
    dnsd, knot, nsd = setup.dnsd, setup.knot, setup.nsd
    path = setup.config / "example.test.yaml"
    zone = "example.test."
    for secondary in (knot, nsd):
        wait_for(lambda s=secondary: soa_serial(s.port, zone) == soa_serial(dnsd.port, zone),
                 15, f"{secondary.name} in step")  # fmt: skip
    knot.stop()
    path.write_text(path.read_text().replace("records:\n", "records:\n  gone: {A: 192.0.2.9}\n", 1))
    changed = time.monotonic()
    assert http(dnsd.admin_port, "POST", "/api/v1/reload", token=TOKEN)[0] == 200
    dnsd.wait_for_log(f"to 127.0.0.1 port {knot.port}: no answer within 1 s", timeout=5)
    assert time.monotonic() - changed < 4.0
    knot.start()
    path.write_text(path.read_text().replace("records:\n", "records:\n  back: {A: 192.0.2.8}\n", 1))
    assert http(dnsd.admin_port, "POST", "/api/v1/reload", token=TOKEN)[0] == 200
    dnsd.wait_for_log(f"to 127.0.0.1 port {knot.port}: NOERROR, answered again", timeout=10)
    wait_for(lambda: short(knot.port, "back.example.test.") == ["192.0.2.8"], 10,
             "knot follows again")  # fmt: skip
    notify_lines = [line for line in dnsd.lines if "NOTIFY" in line and "port" in line]
    assert not any(f"port {nsd.port}: no answer" in line for line in notify_lines), notify_lines
    about_knot = [
        line for line in notify_lines if f"port {knot.port}" in line and "WARNING" in line
    ]
    assert 2 <= len(about_knot) <= 3, about_knot  # silent, (a round lost,) answering again
    text = http(dnsd.admin_port, "GET", "/metrics")[1]
    assert f'secondary="127.0.0.1:{nsd.port}"' in text and 'result="noerror"' in text
