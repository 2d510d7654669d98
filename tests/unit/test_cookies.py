"""Server cookies (RFC 7873, RFC 9018): the RFC's own test vectors, lifetimes, addresses."""

from __future__ import annotations

import ipaddress

import pytest

from dnsd.cookies import CookieFormErr, ServerCookies, split

CLIENT = bytes.fromhex("2464c4abcf10c957")
SECRET = bytes.fromhex("e5e973e5a6b2a43f48e7dc849e37bfcf")


@pytest.mark.parametrize(
    ("client", "address", "stamp", "expected"),
    [
        ("2464c4abcf10c957", "198.51.100.100", 1559731985, "010000005cf79f111f8130c3eee29480"),
        ("2464c4abcf10c957", "198.51.100.100", 1559734385, "010000005cf7a871d4a564a1442aca77"),
        ("fc93fc62807ddb86", "203.0.113.203", 1559734700, "010000005cf7a9acf73a7810aca2381e"),
    ],
)
def test_rfc9018_appendix_a_vectors(client: str, address: str, stamp: int, expected: str) -> None:
    """A.1–A.3: the published server cookies, byte for byte."""
    cookie = ServerCookies.compute(
        bytes.fromhex(client), ipaddress.ip_address(address), stamp, SECRET
    )
    assert cookie.hex() == expected


def test_a_cookie_is_valid_for_its_client_for_an_hour_and_no_other() -> None:
    jar = ServerCookies(bytes(range(32)))
    here, there = ipaddress.ip_address("192.0.2.1"), ipaddress.ip_address("192.0.2.2")
    made = jar.make(CLIENT, here, 1_800_000_000)
    assert len(made) == 16
    assert jar.valid(CLIENT, made, here, 1_800_000_000)
    assert jar.valid(CLIENT, made, here, 1_800_000_000 + 3599)  # across an hour's rotation
    assert not jar.valid(CLIENT, made, here, 1_800_000_000 + 3601)
    assert not jar.valid(CLIENT, made, there, 1_800_000_000)
    assert not jar.valid(bytes(8), made, here, 1_800_000_000)
    assert not ServerCookies(bytes(32)).valid(CLIENT, made, here, 1_800_000_000)
    assert jar.valid(CLIENT, made, here, 1_800_000_000 - 200)  # a clock 200 s behind
    assert not jar.valid(CLIENT, made, here, 1_800_000_000 - 400)


@pytest.mark.parametrize("size", [0, 1, 7, 9, 15, 41, 64])
def test_cookie_lengths_outside_rfc7873_are_formerr(size: int) -> None:
    with pytest.raises(CookieFormErr):
        split(bytes(size))


@pytest.mark.parametrize("size", [8, 16, 24, 40])
def test_cookie_lengths_inside_rfc7873_split(size: int) -> None:
    client, server = split(bytes(range(size)))
    assert len(client) == 8 and len(server) == size - 8
