"""Replies are counted under (qtype, rcode) whatever the length of the name asked."""

from dnslib import QTYPE, DNSRecord

from dnsd.reply import count_key
from dnsd.tally import Tally


def _reply(name: str, qtype: str) -> bytes:
    query = DNSRecord.question(name, qtype)
    reply = query.reply()
    reply.header.rcode = 3
    return bytes(reply.pack())


def test_a_long_name_is_counted_under_its_qtype_not_none() -> None:
    name = "a" * 30 + "." + "b" * 30 + ".example.com"  # > 46 wire bytes
    assert len(name) > 46
    tally = Tally("udp")
    for reply in (_reply(name, "AAAA"), _reply("x.example.com", "AAAA")):
        key = count_key(reply)
        tally.counts[key] = tally.counts.get(key, 0) + 1
    assert tally.totals() == {("AAAA", "NXDOMAIN", "udp"): 2}


def test_a_reply_without_a_question_is_none() -> None:
    reply = bytes(DNSRecord().pack())
    assert count_key(reply) == reply[2:4]
    tally = Tally("tcp")
    tally.counts[count_key(reply)] = 1
    assert list(tally.totals()) == [("NONE", "NOERROR", "tcp")]
    assert QTYPE.AAAA == 28
