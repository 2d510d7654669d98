"""Bursts of RFC 2136 UPDATEs against a real `dnsd serve`: a thousand signed UPDATEs all
answered and applied, and generated UPDATEs leaving the served zone equal to a fresh load
of the files they were written to (bench/update_burst.py measures cached answers during a
burst)."""

from __future__ import annotations

import contextlib
import random
import select
import shutil
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.update
import pytest

from dnsd.loading import load_snapshot
from dnsd.rdata import to_dnspython
from tests.processes import DnsdProcess
from tests.updating import Served, serving, signed

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("bursts")) as started:
        yield started


def test_a_burst_of_a_thousand_signed_updates_is_answered_and_nothing_is_lost(
    served: Served, tmp_path: Path
) -> None:
    """1,000 UPDATEs over UDP as fast as they can be sent (bench/update_burst.py measures
    the cached answers meanwhile): every one answered NOERROR and signed, every value
    served. What the kernel drops is sent again, as a client would (an add that is already
    applied changes nothing)."""
    config = tmp_path / "zones"
    shutil.copytree(served.config, config)
    count, names = 1000, 10
    updates, wires = [], []
    for i in range(count):
        update = signed(served)
        update.id = i
        update.add(f"_acme-challenge.burst{i % names}.example.test.", 60, "TXT", f"v-{i}")
        updates.append(update)
        wires.append(update.to_wire())
    replies: dict[int, bytes] = {}
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(20)]
    with DnsdProcess(config, "--state-dir", str(tmp_path / "state"), "--rrl-rate", "0") as dnsd:
        try:
            for sock in socks:
                sock.bind(("127.0.0.1", 0))
                sock.setblocking(False)
            for _ in range(3):  # the burst, then what got no answer, twice at most
                waiting = [i for i in range(count) if i not in replies]
                for i in waiting:
                    socks[i % len(socks)].sendto(wires[i], ("127.0.0.1", dnsd.port))
                deadline = time.monotonic() + 30
                while len(replies) < count and time.monotonic() < deadline:
                    for sock in select.select(socks, [], [], 0.5)[0]:
                        with contextlib.suppress(BlockingIOError):
                            reply = sock.recv(4096)
                            replies[int.from_bytes(reply[:2])] = reply
                if len(replies) == count:
                    break
        finally:
            for sock in socks:
                sock.close()
        assert len(replies) == count, f"{count - len(replies)} UPDATEs not answered"
        ring = signed(served).keyring
        for i, reply in replies.items():
            message = dns.message.from_wire(reply, keyring=ring, request_mac=updates[i].mac)
            assert message.rcode() == dns.rcode.NOERROR and message.had_tsig, message
        served_values = set()
        for n in range(names):
            query = dns.message.make_query(f"_acme-challenge.burst{n}.example.test.", "TXT")
            response = dns.query.tcp(query, "127.0.0.1", port=dnsd.port, timeout=10)
            served_values |= {r.to_text() for rrset in response.answer for r in rrset}
        assert served_values == {f'"v-{i}"' for i in range(count)}


def generated_updates(seed: int, count: int, names: int) -> list[dns.update.UpdateMessage]:
    """A sequence of `ops` UPDATEs at `names` owners below `gen.dyn`: adds of A and TXT
    (some with a TTL of their own), single deletes, RRset deletes, name deletes, and
    prerequisites that hold or fail; `signed` adds the key later."""
    rng = random.Random(seed)
    made = []
    for _ in range(count):
        update = dns.update.UpdateMessage("example.test.")
        for _ in range(rng.randint(1, 3)):
            owner = f"n{rng.randrange(names)}.gen.dyn.example.test."
            rtype = rng.choice(["A", "TXT"])
            value = f"192.0.2.{rng.randrange(4)}" if rtype == "A" else f"t{rng.randrange(4)}"
            form = rng.choices(["add", "delete", "rrset", "name", "pre"], [6, 2, 1, 1, 1])[0]
            if form == "add":
                update.add(owner, rng.choice([60, 300]), rtype, value)
            elif form == "delete":
                update.delete(owner, rtype, value)
            elif form == "rrset":
                update.delete(owner, rtype)
            elif form == "name":
                update.delete(owner)
            else:
                (update.present if rng.random() < 0.5 else update.absent)(owner, rtype)
        made.append(update)
    return made


def served_records(port: int, owners: list[str]) -> set[tuple[str, str, int, str]]:
    found = set()
    for owner in owners:
        for rtype in ("A", "TXT"):
            query = dns.message.make_query(owner, rtype)
            response = dns.query.tcp(query, "127.0.0.1", port=port, timeout=10)
            for rrset in response.answer:
                found |= {(owner, rtype, rrset.ttl, r.to_text()) for r in rrset}
    return found


def loaded_records(config: Path, owners: list[str]) -> set[tuple[str, str, int, str]]:
    zone = load_snapshot(config, 1).zones["example.test."].config
    return {
        (r.owner, dns.rdatatype.to_text(r.rtype), r.ttl, to_dnspython(r.rtype, rd).to_text())
        for r in zone.rrsets
        if r.owner in owners
        for rd in r.rdatas
    }


@pytest.mark.parametrize("seed", [1, 2])
def test_after_a_burst_of_generated_updates_the_served_zone_is_a_fresh_load_of_its_files(
    served: Served, seed: int
) -> None:
    """Whatever order a burst is applied in, and however it is batched: what is served
    afterwards is what loading the written files gives (records, values and TTLs)."""
    names = 6
    owners = [f"n{n}.gen.dyn.example.test." for n in range(names)]
    ring = signed(served, "ops").keyring

    def one(update: dns.update.UpdateMessage) -> int:
        update.use_tsig(ring, keyname="ops")
        query = dns.query.udp if update.id % 2 else dns.query.tcp
        return int(query(update, "127.0.0.1", port=served.dnsd.port, timeout=20).rcode())

    updates = generated_updates(seed, 150, names)
    with ThreadPoolExecutor(max_workers=16) as pool:
        rcodes = list(pool.map(one, updates))
    assert dns.rcode.NOERROR in rcodes
    assert set(rcodes) <= {dns.rcode.NOERROR, dns.rcode.NXRRSET, dns.rcode.YXRRSET}, rcodes
    now_served = served_records(served.dnsd.port, owners)
    assert now_served, "the burst left nothing to compare"
    assert now_served == loaded_records(served.config, owners)
