"""Fuzzing what zone transfers parse from strangers and from files: TSIG-signed messages (a
mutated signed query is accepted exactly when dnspython's own TSIG check accepts it, and
never raises), transfer queries (never raise, every reply parses), and zone files (a
file:line error or records, never anything else)."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import random
import time
from pathlib import Path

import dns.message
import dns.rcode
import dns.tsig
import dns.tsigkeyring
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnsd.config.zonefile import ZoneFileError, read_zone_file
from dnsd.health.view import HealthView
from dnsd.loading import load_snapshot
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import resolve
from dnsd.snapshot import SnapshotHolder
from dnsd.xfr.outgoing import transfer_type
from dnsd.xfr.service import TransferService
from tests.conftest import DATA
from tests.tiers import examples

SECRET = base64.b64encode(bytes(range(32))).decode()


def signed_config(tmp: Path) -> Path:
    (tmp / "xfr.b64").write_text(SECRET)
    text = (DATA / "good" / "example.test.yaml").read_text()
    (tmp / "example.test.yaml").write_text(
        text + "\ntransfer:\n  allow: [127.0.0.0/8]\n  keys: [xfr-key]\n"
    )
    (tmp / "keys.yaml").write_text(
        "tsig_keys:\n  xfr-key: {algorithm: hmac-sha256, secret_file: xfr.b64}\n"
    )
    return tmp


CONFIG = signed_config(Path(__import__("tempfile").mkdtemp(prefix="dnsd-fuzz-xfr-")))
SNAP = load_snapshot(CONFIG, 1)
RING = dns.tsigkeyring.from_text({"xfr-key": SECRET})
CLIENT = Client(ipaddress.ip_address("127.0.0.1"), "udp")


def signed(name: str, rdtype: str) -> bytes:
    query = dns.message.make_query(name, rdtype)
    query.use_tsig(RING, keyname="xfr-key", algorithm=dns.tsig.HMAC_SHA256)
    return query.to_wire()


SEEDS = [signed("www.example.test.", "A"), signed("example.test.", "SOA"),
         signed("example.test.", "AXFR"), signed("nothing.example.test.", "TXT")]  # fmt: skip


def mutate(wire: bytes, data: st.DataObject) -> bytes:
    out = bytearray(wire)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if kind == "flip" and out:
            at = data.draw(st.integers(0, len(out) - 1))
            out[at] ^= data.draw(st.integers(1, 255))
        elif kind == "cut" and out:
            out = out[: data.draw(st.integers(0, len(out) - 1))]
        else:
            at = data.draw(st.integers(0, len(out)))
            out[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    return bytes(out)


def dnspython_accepts(wire: bytes) -> bool:
    try:
        message = dns.message.from_wire(wire, keyring=RING)
    except Exception:
        return False
    return message.had_tsig


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), st.data())
def test_mutated_signed_queries_are_accepted_exactly_when_the_mac_checks(
    seed: bytes, data: st.DataObject
) -> None:
    wire = mutate(seed, data)
    reply = resolve(Request(wire, CLIENT, SNAP, HealthView(), random.Random(0), time.time()))
    if reply is None:
        assert len(wire) < 12 or wire[2] & 0x80  # the deliberate drops only
        return
    parsed = dns.message.from_wire(reply, ignore_trailing=True, keyring=False)
    if parsed.rcode() in (dns.rcode.NOTAUTH, dns.rcode.FORMERR, dns.rcode.NOTIMP):
        return
    # Answered: the query's MAC checked — or the mutation removed the TSIG altogether.
    if parsed.had_tsig:
        assert dnspython_accepts(wire)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([signed("example.test.", "AXFR"), signed("example.test.", "IXFR")]),
       st.data())  # fmt: skip
def test_mutated_transfer_queries_never_raise_and_every_reply_parses(
    seed: bytes, data: st.DataObject
) -> None:
    wire = mutate(seed, data)
    transfer_type(wire)  # never raises
    service = TransferService(SnapshotHolder(SNAP), None, HealthView)
    client = Client(ipaddress.ip_address("127.0.0.1"), "tcp")
    replies = asyncio.run(service.answer(wire, client))
    assert replies
    for reply in replies:
        assert len(reply) >= 12
        dns.message.from_wire(reply, ignore_trailing=True, keyring=False, one_rr_per_rrset=True)


FRAGMENTS = [
    "$ORIGIN z.example.\n", "$TTL 300\n", "$TTL 1h\n", "@ IN SOA ns h 1 2 3 4 5\n",
    "@ IN NS ns\n", "ns IN A 192.0.2.1\n", "www 60 IN AAAA 2001:db8::1\n", "x IN TXT \"a b\"\n",
    "m IN MX 10 ns\n", "( \n", ")\n", "; comment\n", "$INCLUDE other.zone\n",
    "$INCLUDE /etc/passwd\n", "$GENERATE 1-3 h$ A 192.0.2.$\n", "bad IN A 999.1.1.1\n",
    "c IN CNAME www\n", "s IN SRV 1 2 3 t\n", "\\000 IN A 192.0.2.9\n", "$ORIGIN .\n",
    "h IN HINFO a b\n", "\"\n", "\t IN A 192.0.2.7\n",
]  # fmt: skip


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=25))
def test_zone_files_give_records_or_a_located_error(parts: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "other.zone").write_text("inc IN A 192.0.2.44\n")
        path = directory / "z.zone"
        path.write_text("".join(parts))
        try:
            records = read_zone_file(path, "z.example.", directory, 3600)
        except ZoneFileError as exc:
            assert exc.file and exc.message
            return
        for record in records:
            assert record.owner.endswith(".") and record.rtype and record.file
