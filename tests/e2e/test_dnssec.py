"""DNSSEC signed online, judged by real validators: unbound with the zone's DS
as its trust anchor returns AD=1 through dnsd, and delv reports "fully validated", for
static records, a load-balanced name (before and after a failover), a CNAME chain,
NXDOMAIN and NODATA (compact denial), a wildcard, and delegations with and without DS;
ECS answers for two regions carry signatures that check against the validated DNSKEY;
and with every signature broken on purpose unbound answers SERVFAIL."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.dnssec
import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from dnsd.drill.resolver import Unbound
from tests.admin_client import http
from tests.processes import DnsdProcess

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parent.parent.parent
TOKEN = "dnssec-test-token"
ZONE = "example.test."
EU_WEST = {"198.51.100.10", "198.51.100.11"}
US_EAST = {"192.0.2.10", "192.0.2.11", "192.0.2.12"}


@dataclass
class Signed:
    dnsd: DnsdProcess
    config: Path
    state: Path
    ds: str  # "example.test. IN DS TAG 13 2 HEX"


def signed_config(tmp: Path) -> Path:
    config = tmp / "zones"
    shutil.copytree(ROOT / "zones", config)
    path = config / "example.test.yaml"
    secure = (
        "records:\n  secure: {NS: [ns.secure.example.test.], DS: ['12345 13 2 "
        + "ab" * 32 + "']}\n  ns.secure: {A: 192.0.2.120}\n"
    )  # fmt: skip
    path.write_text(
        path.read_text().replace("records:\n", secure, 1)
        + "\ndnssec: {algorithm: 13}\ntransfer: {allow: [127.0.0.1/32]}\n"
    )
    return config


@pytest.fixture
def signed(tmp_path: Path) -> Iterator[Signed]:
    config, state = signed_config(tmp_path), tmp_path / "state"
    env = {"DNSD_ADMIN_TOKEN": TOKEN}
    with DnsdProcess(config, "--state-dir", str(state), "--rrl-rate", "0", env=env) as dnsd:
        listed = subprocess.run(
            [sys.executable, "-m", "dnsd", "keys", "list", "example.test", "--state-dir", str(state)],
            capture_output=True, text=True, check=True,
        ).stdout.splitlines()  # fmt: skip
        assert listed[0].startswith("key ") and "role csk state active" in listed[0]
        yield Signed(dnsd, config, state, listed[1])


def through(resolver_port: int, name: str, qtype: str) -> tuple[str, bool, list[str]]:
    """(rcode, AD, answer lines) from the validating resolver."""
    query = dns.message.make_query(name, qtype, want_dnssec=True)
    reply = dns.query.udp(query, "127.0.0.1", port=resolver_port, timeout=5)
    answer = [line for rrset in reply.answer for line in rrset.to_text().splitlines()]
    return dns.rcode.to_text(reply.rcode()), bool(reply.flags & dns.flags.AD), answer


def delv(port: int, anchor: Path, name: str, qtype: str) -> str:
    done = subprocess.run(
        ["delv", "@127.0.0.1", "-p", str(port), "-a", str(anchor), "+root=example.test",
         name, qtype],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    return done.stdout + done.stderr


def anchor_file(tmp: Path, ds: str) -> Path:
    tag, algorithm, digest_type, digest = ds.split()[3:7]
    path = tmp / "anchor.conf"
    path.write_text(
        f'trust-anchors {{ "example.test." static-ds {tag} {algorithm} {digest_type} "{digest}"; }};\n'
    )
    return path


CASES = [
    ("mail.example.test.", "A", "192.0.2.25"),
    ("mail.example.test.", "AAAA", "2001:db8::25"),
    ("example.test.", "MX", "mail.example.test."),
    ("example.test.", "TXT", "v=spf1"),
    ("www.example.test.", "A", None),  # load-balanced
    ("docs.example.test.", "A", "CNAME"),  # a CNAME chain into the load-balanced name
    ("nothere.example.test.", "A", "nxdomain"),  # compact denial: NODATA with NXNAME
    ("mail.example.test.", "TXT", "nodata"),
    ("x.apps.example.test.", "A", "192.0.2.99"),  # wildcard
    ("sub.example.test.", "DS", "nodata"),  # delegation without DS: signed proof
    ("secure.example.test.", "DS", "12345 13 2"),  # delegation with DS
    ("example.test.", "DNSKEY", "257 3 13"),
    ("example.test.", "CDS", "13 2"),
]


def test_unbound_and_delv_validate_every_kind_of_answer(signed: Signed, tmp_path: Path) -> None:
    anchor = anchor_file(tmp_path, signed.ds)
    resolver = asyncio.run(Unbound(ZONE, signed.dnsd.port, signed.ds).start())
    try:
        for name, qtype, expected in CASES:
            rcode, ad, answer = through(resolver.port, name, qtype)
            assert rcode == "NOERROR", (name, qtype, rcode)
            assert ad, (name, qtype, answer)
            if expected in ("nxdomain", "nodata"):
                assert not [a for a in answer if f" {qtype} " in a], answer
            elif expected == "CNAME":
                assert any(" CNAME " in a for a in answer) and any(" RRSIG " in a for a in answer)
            elif expected is not None:
                assert any(expected in a for a in answer), (name, qtype, answer)
            out = delv(signed.dnsd.port, anchor, name, qtype)
            assert "fully validated" in out, (name, qtype, out)
        # A failover: the new answer validates too (delv asks dnsd directly: no cache).
        before = delv(signed.dnsd.port, anchor, "www.example.test.", "A")
        assert "fully validated" in before and any(a in before for a in US_EAST)
        status, body = http(signed.dnsd.admin_port, "PUT", "/api/v1/overrides/pools/us-east",
                            {"state": "down"}, token=TOKEN)  # fmt: skip
        assert status == 200, body
        after = delv(signed.dnsd.port, anchor, "www.example.test.", "A")
        assert "fully validated" in after and any(a in after for a in EU_WEST), after
        assert through(resolver.port, "api.example.test.", "A")[1]  # fresh through unbound too
    finally:
        resolver.stop()


def test_ecs_clients_in_two_regions_get_different_validated_answers(signed: Signed) -> None:
    """unbound passes each client's subnet on to dnsd (subnetcache) and validates what comes
    back: a client in Great Britain and one in the US get different, signed answers."""
    resolver = asyncio.run(Unbound(ZONE, signed.dnsd.port, signed.ds, client_subnet=True).start())
    answers = {}
    try:
        for subnet in ("81.2.69.0/24", "12.0.0.0/24"):  # Great Britain (WEU), the US (ENAM)
            query = dns.message.make_query("www.example.test.", "A", want_dnssec=True)
            network, length = subnet.split("/")
            query.use_edns(0, dns.flags.DO, options=[dns.edns.ECSOption(network, int(length))])
            reply = dns.query.udp(query, "127.0.0.1", port=resolver.port, timeout=5)
            assert reply.rcode() == dns.rcode.NOERROR and reply.flags & dns.flags.AD, reply
            rrset = next(r for r in reply.answer if r.rdtype == dns.rdatatype.A)
            answers[subnet] = {rd.address for rd in rrset}
    finally:
        resolver.stop()
    assert answers["81.2.69.0/24"] <= EU_WEST and answers["12.0.0.0/24"] <= US_EAST


def test_a_broken_signature_is_servfail_at_the_validator(signed: Signed) -> None:
    signed.dnsd.stop()
    hook = "--test-corrupt-signatures"
    with DnsdProcess(
        signed.config, "--state-dir", str(signed.state), "--rrl-rate", "0", hook
    ) as broken:
        resolver = asyncio.run(Unbound(ZONE, broken.port, signed.ds).start())
        try:
            rcode, ad, _ = through(resolver.port, "mail.example.test.", "A")
        finally:
            resolver.stop()
    assert rcode == "SERVFAIL" and not ad


def validated_dnskey(port: int) -> dict[dns.name.Name, dns.rrset.RRset]:
    reply = dns.query.udp(dns.message.make_query(ZONE, "DNSKEY", want_dnssec=True), "127.0.0.1",
                          port=port, timeout=5)  # fmt: skip
    dnskey = next(r for r in reply.answer if r.rdtype == dns.rdatatype.DNSKEY)
    rrsig = next(r for r in reply.answer if r.rdtype == dns.rdatatype.RRSIG)
    keys = {dns.name.from_text(ZONE): dnskey}
    dns.dnssec.validate(dnskey, rrsig, keys)
    return keys


def test_referrals_carry_a_signed_ds_or_a_signed_proof_that_there_is_none(signed: Signed) -> None:
    port = signed.dnsd.port
    keys = validated_dnskey(port)
    for name, proof in (("host.secure.example.test.", "DS"), ("host.sub.example.test.", "NSEC")):
        reply = dns.query.udp(dns.message.make_query(name, "A", want_dnssec=True), "127.0.0.1",
                              port=port, timeout=5)  # fmt: skip
        assert not reply.flags & dns.flags.AA  # a referral
        ns = next(r for r in reply.authority if r.rdtype == dns.rdatatype.NS)
        assert not [r for r in reply.authority
                    if r.rdtype == dns.rdatatype.RRSIG and r.covers == dns.rdatatype.NS]  # fmt: skip
        evidence = next(r for r in reply.authority if dns.rdatatype.to_text(r.rdtype) == proof)
        rrsig = next(r for r in reply.authority
                     if r.rdtype == dns.rdatatype.RRSIG and r.covers == evidence.rdtype)  # fmt: skip
        dns.dnssec.validate(evidence, rrsig, keys)  # raises when the signature is wrong
        assert evidence.name == ns.name
        if proof == "NSEC":  # the bitmap says: NS here, no DS
            assert "NS" in evidence.to_text() and " DS" not in evidence.to_text()
        glue = [r for r in reply.additional if r.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA)]
        assert glue and not [r for r in reply.additional if r.rdtype == dns.rdatatype.RRSIG]


def test_every_worker_signs_with_the_same_key(tmp_path: Path) -> None:
    config, state = signed_config(tmp_path), tmp_path / "state"
    with DnsdProcess(
        config, "--state-dir", str(state), "--workers", "3", "--rrl-rate", "0"
    ) as dnsd:
        dnsd.wait_for_log("started 2 worker process(es)")
        deadline = time.monotonic() + 15
        while sum("listening on" in line for line in dnsd.lines) < 3:
            assert time.monotonic() < deadline, dnsd.output
            time.sleep(0.05)
        keys = validated_dnskey(dnsd.port)
        for _ in range(24):  # new source ports: the kernel spreads them over the processes
            reply = dns.query.udp(dns.message.make_query("mail.example.test.", "A", want_dnssec=True),
                                  "127.0.0.1", port=dnsd.port, timeout=5)  # fmt: skip
            rrset = next(r for r in reply.answer if r.rdtype == dns.rdatatype.A)
            rrsig = next(r for r in reply.answer if r.rdtype == dns.rdatatype.RRSIG)
            dns.dnssec.validate(rrset, rrsig, keys)
    assert len(list((state / "keys" / "example.test").glob("K*.json"))) == 1


ROLL_ZONE = """\
zone: roll.test
ttl: 1
soa: {mname: ns1.roll.test., rname: h.roll.test., ttl: 1, minimum: 1}
dnssec: {algorithm: 13, split_keys: true}
records:
  "@": {NS: ns1.roll.test.}
  ns1: {A: 127.0.0.1}
  www: {A: 192.0.2.1}
"""


def keys_cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "dnsd", "keys", *args],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def key_tags(port: int, flags: int) -> set[int]:
    """Tags of roll.test's DNSKEYs with these flags (256 ZSK, 257 KSK)."""
    reply = dns.query.udp(dns.message.make_query("roll.test.", "DNSKEY"), "127.0.0.1", port=port,
                          timeout=5)  # fmt: skip
    return {dns.dnssec.key_id(rd) for rrset in reply.answer for rd in rrset if rd.flags == flags}


def test_a_zsk_roll_keeps_a_validating_resolver_validating(tmp_path: Path) -> None:
    config, state = tmp_path / "zones", tmp_path / "state"
    config.mkdir()
    (config / "roll.test.yaml").write_text(ROLL_ZONE)
    with DnsdProcess(config, "--state-dir", str(state), "--rrl-rate", "0") as dnsd:
        listed = keys_cli("list", "roll.test", "--state-dir", str(state)).splitlines()
        assert [line.split()[5] for line in listed if line.startswith("key ")] == [
            "ksk",
            "zsk",
        ] or [line.split()[5] for line in listed if line.startswith("key ")] == ["zsk", "ksk"]
        ds = next(line for line in listed if " IN DS " in line)
        old = key_tags(dnsd.port, 256)
        resolver = asyncio.run(Unbound("roll.test.", dnsd.port, ds).start())
        try:
            assert through(resolver.port, "www.roll.test.", "A")[1]
            keys_cli("roll", "roll.test", "--dir", str(config), "--state-dir", str(state))
            states: list[str] = []
            for _ in range(20):  # the status API shows the new ZSK published within a second
                _, status = http(dnsd.admin_port, "GET", "/api/v1/status")
                states = [f"{k['role']} {k['state']}" for k in status["dnssec"]["roll.test."]]
                if "zsk published" in states:
                    break
                time.sleep(0.1)
            assert sorted(states) == ["ksk active", "zsk active", "zsk published"], states
            seen: list[tuple[str, bool, str]] = []
            started = time.monotonic()
            while time.monotonic() - started < 9.0:  # publish, switch after 3 s, removal at 6 s
                rcode, ad, answer = through(resolver.port, "www.roll.test.", "A")
                signer = next((a.split()[10] for a in answer if " RRSIG " in a), "-")
                seen.append((rcode, ad, signer))
                time.sleep(0.2)
        finally:
            resolver.stop()
        new = key_tags(dnsd.port, 256)
    assert all(rcode == "NOERROR" and ad for rcode, ad, _ in seen), seen
    assert len(old) == 1 and len(new) == 1 and old != new  # the old ZSK is gone at the end
    signers = [signer for _, _, signer in seen]
    assert str(next(iter(old))) in signers and str(next(iter(new))) in signers  # both signed
    assert "DNSSEC keys of roll.test." in dnsd.output


def test_transfers_and_export_of_a_signed_zone_pass_ldns_verify_zone(
    signed: Signed, tmp_path: Path
) -> None:
    axfr = subprocess.run(
        ["kdig", "@127.0.0.1", "-p", str(signed.dnsd.port), "AXFR", ZONE, "+noall", "+answer"],
        capture_output=True, text=True, timeout=20,
    ).stdout  # fmt: skip
    lines = [line for line in axfr.splitlines() if line and not line.startswith(";")]
    transferred = tmp_path / "axfr.zone"
    transferred.write_text("\n".join(lines[:-1]) + "\n")  # the closing SOA repeats the first
    assert any(" NSEC " in line for line in lines) and any(" RRSIG " in line for line in lines)
    exported = subprocess.run(
        [sys.executable, "-m", "dnsd", "export", "example.test", "--dir", str(signed.config),
         "--state-dir", str(signed.state)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (tmp_path / "export.zone").write_text(exported)
    for path in (transferred, tmp_path / "export.zone"):
        done = subprocess.run(["ldns-verify-zone", str(path)], capture_output=True, text=True)
        assert done.returncode == 0 and "verified" in done.stdout, (path, done.stdout, done.stderr)


def test_a_double_ds_ksk_roll_keeps_a_validating_resolver_validating(tmp_path: Path) -> None:
    config, state = tmp_path / "zones", tmp_path / "state"
    config.mkdir()
    (config / "roll.test.yaml").write_text(ROLL_ZONE)
    roll = ("roll", "roll.test", "--ksk", "--dir", str(config), "--state-dir", str(state))
    with DnsdProcess(config, "--state-dir", str(state), "--rrl-rate", "0") as dnsd:
        (old,) = key_tags(dnsd.port, 257)
        keys_cli(*roll)  # step 1: the new KSK is published, and its DS shown for the parent
        listed = keys_cli("list", "roll.test", "--state-dir", str(state))
        both = [line for line in listed.splitlines() if " IN DS " in line]
        assert len(both) == 2
        deadline = time.monotonic() + 5
        while len(key_tags(dnsd.port, 257)) != 2:  # the server picks the new key file up
            assert time.monotonic() < deadline, dnsd.output
            time.sleep(0.1)
        resolver = asyncio.run(
            Unbound("roll.test.", dnsd.port, both).start()
        )  # the parent: both DS
        try:
            assert through(resolver.port, "www.roll.test.", "A")[1]
            keys_cli(*roll, "--ds-seen")  # step 2: switch, then drop the old KSK
            seen = []
            started = time.monotonic()
            while time.monotonic() - started < 9.0:
                seen.append(through(resolver.port, "www.roll.test.", "A")[:2])
                seen.append(through(resolver.port, "roll.test.", "DNSKEY")[:2])
                time.sleep(0.2)
        finally:
            resolver.stop()
        final = key_tags(dnsd.port, 257)
    assert all(rcode == "NOERROR" and ad for rcode, ad in seen), seen
    assert len(final) == 1 and old not in final  # only the new KSK is left
