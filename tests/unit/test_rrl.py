"""Response rate limiting: token buckets per prefix and response, slip, bounded memory."""

from __future__ import annotations

import ipaddress

from dnslib import DNSRecord

from dnsd.net.rrl import ResponseRateLimiter, RrlSettings, truncated

A = ipaddress.ip_address


def reply(name: str = "www.example.test", rcode: int = 0) -> bytes:
    r = DNSRecord.question(name).reply()
    r.header.rcode = rcode
    return r.pack()


def test_over_the_rate_replies_are_dropped_and_every_second_slips() -> None:
    rrl = ResponseRateLimiter(RrlSettings(rate=10, slip=2))
    verdicts = [rrl.check(A("198.51.100.7"), reply(), 0.0) for _ in range(20)]
    assert verdicts[:10] == ["send"] * 10
    assert verdicts[10:] == ["drop", "slip"] * 5
    assert (rrl.dropped, rrl.slipped) == (5, 5)


def test_buckets_refill_with_time() -> None:
    rrl = ResponseRateLimiter(RrlSettings(rate=10, slip=0))
    for _ in range(10):
        rrl.check(A("198.51.100.7"), reply(), 0.0)
    assert rrl.check(A("198.51.100.7"), reply(), 0.05) == "drop"
    assert rrl.check(A("198.51.100.7"), reply(), 0.25) == "send"  # 0.2 s later: 2 tokens


def test_other_prefixes_and_other_responses_have_their_own_buckets() -> None:
    rrl = ResponseRateLimiter(RrlSettings(rate=1, slip=0))
    assert rrl.check(A("198.51.100.7"), reply(), 0.0) == "send"
    assert rrl.check(A("198.51.100.200"), reply(), 0.0) == "drop"  # same /24
    assert rrl.check(A("198.51.101.7"), reply(), 0.0) == "send"  # another /24
    assert rrl.check(A("198.51.100.7"), reply("mail.example.test"), 0.0) == "send"
    assert rrl.check(A("2001:db8:0:1::1"), reply(), 0.0) == "send"
    assert rrl.check(A("2001:db8:0:1:ffff::1"), reply(), 0.0) == "drop"  # same /56


def test_nxdomain_for_random_names_share_one_bucket() -> None:
    rrl = ResponseRateLimiter(RrlSettings(rate=3, slip=0))
    verdicts = [rrl.check(A("198.51.100.7"), reply(f"r{i}.example.test", 3), 0.0) for i in range(6)]
    assert verdicts == ["send"] * 3 + ["drop"] * 3


def test_the_table_is_bounded() -> None:
    rrl = ResponseRateLimiter(RrlSettings(rate=5, max_entries=1000))
    for i in range(20_000):
        rrl.check(
            A(f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"), reply(f"n{i}.example.test"), 0.0
        )
    assert len(rrl) == 1000


def test_slip_reply_is_tiny_and_truncated() -> None:
    big = DNSRecord.question("www.example.test").reply()
    for i in range(20):
        big.add_answer(*DNSRecord.question("www.example.test").reply().rr)
        big.add_answer(*__import__("dnslib").RR.fromZone(f"www.example.test. 60 IN A 192.0.2.{i}"))
    slim = DNSRecord.parse(truncated(big.pack()))
    assert slim.header.tc == 1 and not slim.rr and str(slim.q.qname) == "www.example.test."
    assert len(truncated(big.pack())) < 50


def test_compact_denial_of_random_names_shares_the_nxdomain_bucket() -> None:
    """RFC 9824: a signed zone answers a nonexistent name NOERROR with an NSEC whose bitmap
    holds NXNAME; for rate limiting it is an NXDOMAIN (DO=1 floods escaped)."""
    from dnsd.dnssec.wire import NXNAME_BITMAP, bitmap

    def compact(name: str) -> bytes:
        owner = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00"
        nsec = b"\x01\x00" + owner + NXNAME_BITMAP
        return (
            reply(name) + b"\xc0\x0c\x00\x2f\x00\x01\x00\x00\x01\x2c" + bytes([0, len(nsec)]) + nsec
        )

    rrl = ResponseRateLimiter(RrlSettings(rate=3, slip=0))
    client = A("198.51.100.7")
    verdicts = [rrl.check(client, compact(f"r{i}.example.test"), 0.0) for i in range(4)]
    assert verdicts == ["send"] * 3 + ["drop"]
    assert rrl.check(client, reply("nx.example.test", 3), 0.0) == "drop"  # the same bucket
    # A NODATA of a name that exists (no NXNAME in its bitmap) keeps its own bucket.
    nodata = reply("mail.example.test") + bitmap((1, 46, 47))
    assert rrl.check(client, nodata, 0.0) == "send"
