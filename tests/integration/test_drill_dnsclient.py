"""The drills' DNS client against a rate-limiting dnsd: a query is only lost when the server
never answers, not when response rate limiting drops or truncates a datagram."""

from __future__ import annotations

import asyncio

import pytest

from dnsd.drill.dnsclient import Answer, DnsClient
from tests.conftest import DATA
from tests.processes import DnsdProcess

pytestmark = pytest.mark.slow


async def ask(port: int, batches: list[int], cookie: bool) -> list[tuple[str, tuple[str, ...]]]:
    """Batches of queries, each batch sent at once, by one client."""
    client = await DnsClient("127.0.0.1", port, timeout_s=0.5, cookie=cookie).open()
    answers = []
    try:
        for count in batches:
            answers += await asyncio.gather(
                *(client.query("mail.example.test", 0.0) for _ in range(count))
            )
    finally:
        client.close()
    return [(a.rcode, a.addresses) for a in answers]


def test_a_truncated_reply_is_asked_again_over_tcp() -> None:
    # slip 1: every reply over the rate goes out truncated, with no records
    with DnsdProcess(DATA / "good", "--rrl-rate", "5", "--rrl-slip", "1") as dnsd:
        answers = asyncio.run(ask(dnsd.port, [60], cookie=False))
    assert answers == [("NOERROR", ("192.0.2.25",))] * 60


async def stream_and_newcomer(port: int) -> list[tuple[str, tuple[str, ...]]]:
    """Client A asks 200 times a second for 1.5 s; client B, new, asks once meanwhile."""
    a = await DnsClient("127.0.0.1", port, timeout_s=0.5, cookie=True).open()
    b = await DnsClient("127.0.0.1", port, timeout_s=0.5, cookie=True).open()

    async def paced(i: int) -> Answer:
        await asyncio.sleep(i / 200)
        return await a.query("mail.example.test", 0.0)

    async def newcomer() -> Answer:
        await asyncio.sleep(0.3)
        return await b.query("mail.example.test", 0.0)

    try:
        answers = [await a.query("mail.example.test", 0.0)]  # A learns its server cookie
        answers += await asyncio.gather(newcomer(), *(paced(i) for i in range(300)))
    finally:
        a.close()
        b.close()
    return [(x.rcode, x.addresses) for x in answers]


def test_a_cookie_client_is_never_dropped_by_the_bucket_cookie_clients_drain() -> None:
    # slip 0: every reply over the rate is dropped. Cookie-carrying queries take the bucket's
    # tokens while there are any, so a new client's first query (no server cookie yet) would
    # be dropped, and its retry too: it goes over TCP instead.
    with DnsdProcess(DATA / "good", "--rrl-rate", "5", "--rrl-slip", "0") as dnsd:
        answers = asyncio.run(stream_and_newcomer(dnsd.port))
    assert answers == [("NOERROR", ("192.0.2.25",))] * 302
