"""DNS cookies on the wire (RFC 7873, RFC 9018): `dig +cookie` learns a server cookie and
dig itself judges it; a client that presents a valid one is not rate limited; bad cookie
lengths are FORMERR."""

from __future__ import annotations

import re
import socket
import subprocess

import dns.edns
import dns.message
import pytest

from tests.admin_client import http
from tests.conftest import DATA
from tests.processes import DnsdProcess
from tests.waiting import until

pytestmark = pytest.mark.slow


def dig(port: int, *args: str) -> str:
    argv = ["dig", "@127.0.0.1", "-p", str(port), "+time=2", "+tries=1", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout


def cookie_of(output: str) -> str | None:
    found = re.search(r"; COOKIE: ([0-9a-f]+)", output)
    return found.group(1) if found else None


def test_dig_learns_a_server_cookie_and_presents_it_back() -> None:
    with DnsdProcess(DATA / "good") as dnsd:
        first = dig(dnsd.port, "+cookie", "mail.example.test")
        cookie = cookie_of(first)
        assert cookie is not None and len(cookie) == 48, first  # client 8 + server 16 bytes
        assert "(good)" in first  # dig checked that its client cookie came back
        assert cookie[16:18] == "01"  # RFC 9018 version 1
        again = dig(dnsd.port, f"+cookie={cookie}", "mail.example.test")
        assert "status: NOERROR" in again and cookie_of(again) is not None
        assert cookie_of(again)[:16] == cookie[:16]  # type: ignore[index]
        # No question, only a cookie (RFC 7873 §5.4): a cookie to learn, NOERROR.
        bare = dig(dnsd.port, "+cookie", "+header-only")
        assert "status: NOERROR" in bare and cookie_of(bare) is not None


@pytest.mark.parametrize("cookie", ["00" * 7, "00" * 10, "00" * 15])
def test_bad_cookie_lengths_are_formerr(cookie: str) -> None:
    with DnsdProcess(DATA / "good") as dnsd:
        out = dig(dnsd.port, f"+cookie={cookie}", "mail.example.test")
        assert "status: FORMERR" in out


def query(option: bytes | None) -> bytes:
    message = dns.message.make_query("mail.example.test", "A", use_edns=0)
    if option is not None:
        message.use_edns(0, options=[dns.edns.GenericOption(dns.edns.OptionType.COOKIE, option)])
    return message.to_wire()


def burst(source: str, port: int, option: bytes | None, count: int) -> list[dns.message.Message]:
    """Send `count` queries at once from `source`, then take every reply that comes."""
    replies = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((source, 0))
        sock.settimeout(0.5)
        wire = query(option)
        for _ in range(count):
            sock.sendto(wire, ("127.0.0.1", port))
        try:
            while True:
                replies.append(dns.message.from_wire(sock.recv(4096)))
        except TimeoutError:
            pass
    return replies


def test_a_valid_server_cookie_is_spared_rate_limiting() -> None:
    client = bytes.fromhex("0102030405060708")
    with DnsdProcess(DATA / "good", "--rrl-rate", "5", "--rrl-slip", "0") as dnsd:
        plain = burst("127.0.3.1", dnsd.port, None, 40)
        (first,) = burst("127.0.4.1", dnsd.port, client, 1)
        learned = next(o for o in first.options if o.otype == dns.edns.OptionType.COOKIE)
        option = learned.to_wire()
        assert option is not None and option[:8] == client and len(option) == 24
        valid = burst("127.0.4.1", dnsd.port, option, 40)
        forged = burst("127.0.5.1", dnsd.port, option[:8] + bytes(16), 40)
    assert len(plain) <= 10  # 5/s, a burst of 5: most of 40 queries at once are dropped
    assert len(valid) == 40  # every query with a valid server cookie is answered
    assert len(forged) <= 10  # a made-up server cookie earns nothing


def test_every_worker_accepts_the_cookie_another_made(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--workers 3 share the master key (STATE_DIR/cookie.key): a cookie learned from any
    process exempts its client from RRL in all of them (the kernel spreads the source
    ports of a burst over the processes)."""
    client = bytes.fromhex("1112131415161718")
    args = ("--workers", "3", "--rrl-rate", "5", "--rrl-slip", "0", "--state-dir", str(tmp_path))
    with DnsdProcess(DATA / "good", *args) as dnsd:
        dnsd.wait_for_log("started 2 worker process(es)")
        listening = lambda: sum("listening on" in line for line in dnsd.lines) >= 3  # noqa: E731
        until(listening, 15.0, lambda: dnsd.output)
        (first,) = burst("127.0.7.1", dnsd.port, client, 1)
        option = next(o for o in first.options if o.otype == dns.edns.OptionType.COOKIE).to_wire()
        answered = 0
        for _ in range(8):  # eight source ports, five queries each
            answered += len(burst("127.0.7.1", dnsd.port, option, 5))
    assert (tmp_path / "cookie.key").exists()
    assert answered == 40


def cache_counts(admin_port: int) -> tuple[float, float]:
    _, text = http(admin_port, "GET", "/metrics")
    found = dict(re.findall(r'^dnsd_answer_cache_total\{result="(\w+)"\} (\S+)$', text, re.M))
    return float(found["hit"]), float(found["miss"])


@pytest.mark.parametrize("name", ["mail.example.test", "www.example.test"], ids=["static", "lb"])
def test_plain_dig_with_its_default_cookie_is_answered_and_counted_by_the_cache(
    name: str,
) -> None:
    """`dig` sends a client cookie unless told +nocookie (a new one per run): its queries
    are answer-cache hits, counted in dnsd_answer_cache_total, each with its own valid
    cookie back."""
    with DnsdProcess(DATA / "good") as dnsd:
        hits, misses = cache_counts(dnsd.admin_port)
        outputs = [dig(dnsd.port, name) for _ in range(5)]
        assert all("status: NOERROR" in out and "(good)" in out for out in outputs)
        assert len({cookie_of(out) for out in outputs}) == 5  # every run its own
        after_hits, after_misses = cache_counts(dnsd.admin_port)
        assert after_misses - misses == 1  # the first of the name
        assert after_hits - hits == 4
