"""RFC 2136 dynamic update against a real `dnsd serve`, with the real clients: BIND's
`nsupdate` (UDP, and TCP with -v) and Knot's `knsupdate`, TSIG-signed with -y; `dig`
checks what is served. A refused UPDATE changes no file and no serial."""

from __future__ import annotations

import functools
import shutil
import signal
import socket
import struct
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.update
import pytest

from dnsd.drill.ports import free_port_pair
from tests.admin_client import http
from tests.processes import DnsdProcess, Redis
from tests.secondaries import Knot
from tests.updating import (
    GRANTS,
    TOKEN,
    Served,
    dig,
    knsupdate,
    nsupdate,
    secret,
    serving,
    signed,
    status,
)
from tests.waiting import until

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parent.parent.parent


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("update")) as started:
        yield started


def serial(port: int) -> int:
    return int(dig(port, "example.test", "SOA")[0].split()[2])


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def test_a_bad_update_section_is_a_clear_config_error(tmp_path: Path) -> None:
    config = tmp_path / "zones"
    shutil.copytree(ROOT / "zones", config)
    (config / "keys.yaml").write_text(
        "tsig_keys:\n  acme: {algorithm: hmac-sha256, secret_file: a.b64}\n"
    )
    (config / "a.b64").write_text(secret() + "\n")
    with open(config / "example.test.yaml", "a") as handle:
        handle.write(
            "update:\n"
            "  - key: acmee\n    names: ['_acme-challenge', 'a..b']\n    types: [TXT, SOA, RRSIG, FOO]\n"
            "  - {key: acme, names: [], types: [TXT]}\n"
        )  # fmt: skip
    done = subprocess.run(["python3", "-m", "dnsd", "check", str(config)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "update[0].key: undefined TSIG key 'acmee' (did you mean \"acme\"?)" in out
    assert "update[0].names: not a name relative to the zone: 'a..b'" in out
    assert "update[0].types: 'SOA' cannot be granted" in out
    assert "update[0].types: 'RRSIG' cannot be granted" in out
    assert "update[0].types: 'FOO' cannot be granted: unknown type" in out
    assert "update[1].names: a grant needs at least one name" in out


def test_refused_updates_change_nothing(served: Served) -> None:
    port = served.dnsd.port
    acme, ops = f"hmac-sha256:acme:{served.secret}", f"hmac-sha256:ops:{served.ops}"
    before, first = served.files(), serial(port)
    add = "update add _acme-challenge.example.test. 60 TXT token"
    cases = [
        (add, None, "example.test", "update failed: REFUSED"),  # no TSIG
        (add, f"hmac-sha256:nokey:{served.secret}", "example.test", "NOTAUTH(BADKEY)"),
        (add, f"hmac-sha256:acme:{secret()}", "example.test", "NOTAUTH(BADSIG)"),
        (add, f"hmac-sha256:stranger:{served.stranger}", "example.test", "REFUSED"),  # not granted
        ("update add other.example.test. 60 TXT x", acme, "example.test", "REFUSED"),  # name
        (
            "update add _acme-challenge.example.test. 60 CAA 0 issue ca.test",
            acme,
            "example.test",
            "REFUSED",
        ),  # type outside the grant
        ("update add www.example.test. 60 TXT x", acme, "example.test", "REFUSED"),  # LB name
        ("update add www.example.test. 60 A 192.0.2.1", ops, "example.test", "REFUSED"),
        ("update add example.test. 60 NS ns3.example.test.", ops, "example.test", "REFUSED"),
        ("update delete example.test. NS", ops, "example.test", "REFUSED"),  # apex NS
        ("update delete example.test. ANY", ops, "example.test", "REFUSED"),  # SOA, NS in it
        ("update add example.test. 60 SOA a. b. 1 2 3 4 5", ops, "example.test", "REFUSED"),
        (
            "update add _acme-challenge.example.net. 60 TXT x",
            acme,
            "example.net",
            "REFUSED",
        ),  # no update: section
        ("update add _acme-challenge.nothere.org. 60 TXT x", acme, "nothere.org", "NOTAUTH"),
        # all or nothing: the granted half of a refused UPDATE is not applied either
        (f"{add}\nupdate add other.example.test. 60 TXT x", acme, "example.test", "REFUSED"),
    ]
    for commands, key, zone, expected in cases:
        out = nsupdate(port, commands, key, zone=zone)
        assert expected in out and "rc=0" not in out, (commands, key, out)
    # TCP, and Knot's client
    out = nsupdate(port, add, f"hmac-sha256:acme:{secret()}", tcp=True)
    assert "NOTAUTH(BADSIG)" in out, out
    out = knsupdate(port, "update add www.example.test. 60 TXT x", acme)
    assert "REFUSED" in out, out
    assert served.files() == before
    assert serial(port) == first
    assert dig(port, "_acme-challenge.example.test", "TXT") == []
    text = metrics(served.dnsd.admin_port)
    assert 'dnsd_updates_total{rcode="REFUSED",zone="example.test"}' in text
    assert 'dnsd_updates_total{rcode="REFUSED",zone="example.net"}' in text
    assert 'dnsd_updates_total{rcode="NOTAUTH",zone=""}' in text  # BADKEY, BADSIG, not served
    assert 'dnsd_updates_total{rcode="NOERROR"' not in text


def events(served: Served) -> list[dict[str, object]]:
    status_code, body = http(served.dnsd.admin_port, "GET", "/api/v1/events?kind=config")
    assert status_code == 200, body
    return [e for e in body["events"] if e["cause"] == "update"]


def test_an_acme_challenge_txt_is_added_and_deleted(served: Served) -> None:
    port = served.dnsd.port
    acme = f"hmac-sha256:acme:{served.secret}"
    name = "_acme-challenge.www.example.test."  # below the load-balanced www
    first, seen = serial(port), len(events(served))
    out = nsupdate(port, f"update add {name} 60 TXT token-one")  # no key: refused
    assert "REFUSED" in out, out
    out = nsupdate(port, f"update add {name} 60 TXT token-one", acme)  # UDP
    assert "rc=0" in out, out
    assert dig(port, name, "TXT") == ['"token-one"']
    assert serial(port) > first
    text = (served.config / "example.test.yaml").read_text()
    records = text.split("\nrecords:\n", 1)[1].split("\nupdate:\n", 1)[0]
    assert "_acme-challenge.www: {ttl: 60, TXT: token-one}" in records, text
    out = nsupdate(port, f'update add {name} 60 TXT "token two"', acme, tcp=True)  # TCP
    assert "rc=0" in out, out
    assert dig(port, name, "TXT") == ['"token two"', '"token-one"']
    second = serial(port)
    out = knsupdate(port, f"update delete {name} TXT token-one", acme)  # Knot's client
    assert "rc=0" in out and "REFUSED" not in out, out
    assert dig(port, name, "TXT") == ['"token two"']
    assert serial(port) > second
    out = nsupdate(port, f"update delete {name} TXT", acme)  # the whole RRset
    assert "rc=0" in out, out
    assert status(port, name, "TXT") == "NXDOMAIN"
    assert "_acme-challenge.www" not in (served.config / "example.test.yaml").read_text()
    assert status(port, "www.example.test", "A") == "NOERROR"  # the LB name is untouched
    # the apex's own _acme-challenge, and a name the other key may change
    ops = f"hmac-sha256:ops:{served.ops}"
    out = nsupdate(port, "update add _acme-challenge.example.test. 60 TXT apex-token", acme)
    assert "rc=0" in out, out
    out = nsupdate(port, "update add a.b.dyn.example.test. 300 A 192.0.2.7", ops)
    assert "rc=0" in out, out
    assert dig(port, "_acme-challenge.example.test", "TXT") == ['"apex-token"']
    assert dig(port, "a.b.dyn.example.test", "A") == ["192.0.2.7"]
    made = events(served)[seen:]
    assert len(made) == 6, made  # one per applied UPDATE
    assert [e["actor"] for e in made] == ["acme"] * 5 + ["ops"]
    text = metrics(served.dnsd.admin_port)
    line = 'dnsd_updates_total{rcode="NOERROR",zone="example.test"} '
    counted = [float(x.removeprefix(line)) for x in text.splitlines() if x.startswith(line)]
    assert counted and counted[0] >= 6, counted  # nsupdate may resend one over UDP: no-op
    check = subprocess.run(["python3", "-m", "dnsd", "check", str(served.config)],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_prerequisites_decide_and_a_failed_one_changes_nothing(served: Served) -> None:
    port = served.dnsd.port
    acme = f"hmac-sha256:acme:{served.secret}"
    name = "_acme-challenge.pre.example.test."
    out = nsupdate(port, f"prereq nxdomain {name}\nupdate add {name} 60 TXT v1", acme)
    assert "rc=0" in out, out
    before, first = served.files(), serial(port)
    absent = "_acme-challenge.absent.example.test."
    failing = [
        (f"prereq nxdomain {name}", "YXDOMAIN"),  # name in use
        ("prereq nxdomain www.example.test.", "YXDOMAIN"),  # a load-balanced name is in use
        (f"prereq yxdomain {absent}", "NXDOMAIN"),
        (f"prereq nxrrset {name} TXT", "YXRRSET"),
        (f"prereq yxrrset {name} CAA", "NXRRSET"),
        (f"prereq yxrrset {name} TXT v2", "NXRRSET"),  # value-dependent: not that value
        (f"prereq yxrrset {name} TXT v1\nprereq yxrrset {name} TXT v0", "NXRRSET"),  # not that set
    ]
    for prereq, rcode in failing:
        out = nsupdate(port, f"{prereq}\nupdate add {absent} 60 TXT x", acme)
        assert f"update failed: {rcode}" in out, (prereq, out)
    assert served.files() == before and serial(port) == first
    assert dig(port, absent, "TXT") == []

    # dnspython for the forms nsupdate will not send: a prerequisite outside the zone,
    # one with a TTL, and an update outside the zone
    def with_ttl(update: dns.update.UpdateMessage) -> None:
        update.present(name, "TXT", "v1")
        update.prerequisite[-1].ttl = 5  # a prerequisite must have TTL 0

    ring = {dns.name.from_text("acme"): dns.tsig.Key("acme", served.secret, dns.tsig.HMAC_SHA256)}
    odd = [
        (lambda u: u.present("other.example.net."), dns.rcode.NOTZONE),
        (lambda u: u.add("x.example.net.", 60, "TXT", "x"), dns.rcode.NOTZONE),
        (with_ttl, dns.rcode.FORMERR),
    ]
    for build, rcode in odd:
        update = dns.update.UpdateMessage("example.test.", keyring=ring, keyname="acme")
        build(update)
        update.add(absent, 60, "TXT", "x")
        response = dns.query.udp(update, "127.0.0.1", port=port, timeout=5)
        assert response.rcode() == rcode, (rcode, response)
        assert response.had_tsig  # the answer is signed
    assert served.files() == before and serial(port) == first
    # holding prerequisites: the value is replaced in one UPDATE
    out = nsupdate(port, f"prereq yxrrset {name} TXT v1\nprereq yxdomain www.example.test.\n"
                   f"prereq nxrrset {name} CAA\nupdate delete {name} TXT v1\n"
                   f"update add {name} 60 TXT v2", acme)  # fmt: skip
    assert "rc=0" in out, out
    assert dig(port, name, "TXT") == ['"v2"']
    assert serial(port) > first


def test_a_burst_of_updates_and_config_api_writes_serialize_and_nothing_is_lost(
    served: Served,
) -> None:
    port, name = served.dnsd.port, "_acme-challenge.burst.example.test."

    def one(i: int) -> int:
        update = signed(served)
        update.add(name, 60, "TXT", f"value-{i}")
        query = dns.query.udp if i % 2 else dns.query.tcp
        return int(query(update, "127.0.0.1", port=port, timeout=20).rcode())

    def api(i: int) -> int:
        route = f"/api/v1/config/zones/example.test/records/api-{i}"
        return http(served.dnsd.admin_port, "PUT", route, {"A": f"192.0.2.{i + 1}"}, TOKEN)[0]

    def unloadable() -> int:  # granted, but the zone would not load: a wildcard's NS
        update = signed(served, "ops")
        update.add("*.w.dyn.example.test.", 60, "NS", "ns1.example.test.")
        return int(dns.query.tcp(update, "127.0.0.1", port=port, timeout=20).rcode())

    with ThreadPoolExecutor(max_workers=12) as pool:
        updates = [pool.submit(one, i) for i in range(24)]
        writes = [pool.submit(api, i) for i in range(6)]
        bad = pool.submit(unloadable)
        # UPDATEs written together: the one that does not load is refused alone
        assert [u.result() for u in updates] == [dns.rcode.NOERROR] * 24
        assert all(w.result() in (200, 201) for w in writes)
        assert bad.result() == dns.rcode.REFUSED
    assert dig(port, name, "TXT") == sorted(f'"value-{i}"' for i in range(24))
    assert all(dig(port, f"api-{i}.example.test", "A") == [f"192.0.2.{i + 1}"] for i in range(6))
    assert status(port, "x.w.dyn.example.test", "NS") == "NXDOMAIN"


def test_an_update_is_bounded_in_size_and_records(served: Served) -> None:
    port, before = served.dnsd.port, served.files()
    big = signed(served)
    for i in range(700):  # about 20 KB on the wire
        big.add("_acme-challenge.big.example.test.", 60, "TXT", f"value-number-{i}")
    many = signed(served)
    for i in range(501):
        many.add("_acme-challenge.many.example.test.", 60, "TXT", str(i))
    assert len(big.to_wire()) > 16_384 > len(many.to_wire())
    # too big: refused before it is parsed (so unsigned); too many records: signed
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        wire = big.to_wire()
        sock.sendall(struct.pack("!H", len(wire)) + wire)
        (length,) = struct.unpack("!H", sock.recv(2))
        reply = sock.recv(length)
    assert reply[:2] == wire[:2] and reply[3] & 0x0F == dns.rcode.REFUSED
    response = dns.query.tcp(many, "127.0.0.1", port=port, timeout=10)
    assert response.rcode() == dns.rcode.REFUSED and response.had_tsig
    assert served.files() == before


def test_the_event_loop_udp_listener_takes_updates_too(served: Served, tmp_path: Path) -> None:
    config = tmp_path / "zones"
    shutil.copytree(served.config, config)
    args = ("--udp-loop", "asyncio", "--state-dir", str(tmp_path / "state"))
    with DnsdProcess(config, *args) as dnsd:
        name = "_acme-challenge.loop.example.test."
        out = nsupdate(dnsd.port, f"update add {name} 60 TXT on-the-loop",
                       f"hmac-sha256:acme:{served.secret}")  # fmt: skip
        assert "rc=0" in out, out
        assert dig(dnsd.port, name, "TXT") == ['"on-the-loop"']


def test_a_knot_secondary_follows_an_update_and_it_survives_a_restart(tmp_path: Path) -> None:
    config = tmp_path / "zones"
    shutil.copytree(ROOT / "zones", config)
    acme, xfr = secret(), secret()
    (config / "acme.b64").write_text(acme + "\n")
    (config / "xfr.b64").write_text(xfr + "\n")
    (config / "keys.yaml").write_text(
        "tsig_keys:\n  acme: {algorithm: hmac-sha256, secret_file: acme.b64}\n"
        "  xfr-key: {algorithm: hmac-sha256, secret_file: xfr.b64}\n"
    )
    port = free_port_pair()
    knot = Knot(tmp_path / "knot", port, ["example.test."], ("xfr-key", xfr))
    with open(config / "example.test.yaml", "a") as handle:
        handle.write(
            GRANTS.split("  - key: ops")[0]
            + f'transfer: {{allow: [127.0.0.1/32], keys: [xfr-key]}}\nnotify: ["127.0.0.1:{knot.port}"]\n'
        )
    name = "_acme-challenge.www.example.test."
    state = ("--state-dir", str(tmp_path / "state"))
    with DnsdProcess(config, *state, listen=f"127.0.0.1:{port}") as dnsd, knot:
        first = serial(knot.port) if dig(knot.port, "example.test", "SOA") else 0
        deadline = time.monotonic() + 10
        while not first and time.monotonic() < deadline:  # the first AXFR
            time.sleep(0.1)
            first = serial(knot.port) if dig(knot.port, "example.test", "SOA") else 0
        assert first, "knot did not transfer the zone"
        out = nsupdate(
            port, f"update add {name} 60 TXT secondary-token", f"hmac-sha256:acme:{acme}"
        )
        assert "rc=0" in out, out
        started = time.monotonic()
        while dig(knot.port, name, "TXT") != ['"secondary-token"']:
            assert time.monotonic() - started < 5, "knot did not follow the update within 5 s"
            time.sleep(0.05)
        new = serial(knot.port)
        assert new > first
        # an IXFR from the first serial: the difference, not the whole zone
        dnsd.wait_for_log(f"serial {new} from {first}, ", timeout=5)
    with DnsdProcess(config, *state, listen=f"127.0.0.1:{port}") as again:
        assert dig(again.port, name, "TXT") == ['"secondary-token"']


def test_an_update_on_one_node_is_served_by_another(tmp_path: Path) -> None:
    acme = secret()
    cluster_key = tmp_path / "cluster.key"
    cluster_key.write_text("update-sync-cluster-key-0123456789")
    redis = Redis().start()
    try:
        nodes = []
        for node, region in (("a", "WNAM"), ("b", "WEU")):
            config = tmp_path / node / "zones"
            shutil.copytree(ROOT / "zones", config)
            (config / "acme.b64").write_text(acme + "\n")
            (config / "keys.yaml").write_text(
                "tsig_keys:\n  acme: {algorithm: hmac-sha256, secret_file: acme.b64}\n"
            )
            with open(config / "example.test.yaml", "a") as handle:
                handle.write(GRANTS.split("  - key: ops")[0])
            nodes.append(DnsdProcess(
                config, "--redis", f"redis://127.0.0.1:{redis.port}/0", "--node", node,
                "--pop-region", region, "--redis-key-file", str(cluster_key),
                "--state-dir", str(tmp_path / node / "state"),
            ).__enter__())  # fmt: skip
        try:
            for proc in nodes:
                proc.wait_for_log("sharing health as node")
            name = "_acme-challenge.www.example.test."
            out = nsupdate(nodes[0].port, f"update add {name} 60 TXT shared-token",
                           f"hmac-sha256:acme:{acme}")  # fmt: skip
            assert "rc=0" in out, out
            started = time.monotonic()
            while dig(nodes[1].port, name, "TXT") != ['"shared-token"']:
                assert time.monotonic() - started < 3, "node b does not serve the update"
                time.sleep(0.05)
        finally:
            for proc in nodes:
                proc.__exit__(None, None, None)
    finally:
        redis.kill()


def test_an_update_in_a_signed_zone_is_signed_online(served: Served, tmp_path: Path) -> None:
    config = tmp_path / "zones"
    shutil.copytree(served.config, config)
    with open(config / "example.test.yaml", "a") as handle:
        handle.write("dnssec: {algorithm: 13}\n")
    with DnsdProcess(config, "--state-dir", str(tmp_path / "state")) as dnsd:
        name = "_acme-challenge.signed.example.test."
        out = nsupdate(dnsd.port, f"update add {name} 60 TXT signed-token",
                       f"hmac-sha256:acme:{served.secret}")  # fmt: skip
        assert "rc=0" in out, out
        answer = subprocess.run(
            ["dig", "@127.0.0.1", "-p", str(dnsd.port), "+dnssec", "+norec", "+time=2", name, "TXT"],
            capture_output=True, text=True, timeout=10,
        ).stdout  # fmt: skip
        records = [line.split() for line in answer.splitlines() if line.startswith(name)]
        assert [r[3] for r in records] == ["TXT", "RRSIG"], answer
        assert records[1][4] == "TXT" and records[0][4] == '"signed-token"'


def worker_owned(port: int, main: DnsdProcess, tcp: bool) -> int:
    """A source port whose UPDATEs the kernel hands to a worker (SO_REUSEPORT picks the
    process by the addresses and ports): the main process stopped, a query from it is
    answered all the same."""
    query = dns.message.make_query("ns1.example.test.", "A")
    main.signal(signal.SIGSTOP)
    try:
        for _ in range(40):
            family = socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM
            with socket.socket(socket.AF_INET, family) as sock:
                sock.bind(("127.0.0.1", 0))
                source = int(sock.getsockname()[1])
                try:
                    if tcp:
                        sock.connect(("127.0.0.1", port))
                        sock.setblocking(False)  # as dnspython takes a socket
                        reply = dns.query.tcp(query, "127.0.0.1", timeout=0.5, sock=sock)
                        # no TIME_WAIT left behind: nsupdate connects from this port next
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                    else:
                        sock.setblocking(False)
                        reply = dns.query.udp(query, "127.0.0.1", 0.3, port, sock=sock)
                except (TimeoutError, dns.exception.Timeout):
                    continue  # the main process's: it is stopped
                if reply.answer:
                    return source
    finally:
        main.signal(signal.SIGCONT)
    raise AssertionError("no source port reached a worker")


def test_an_update_that_reaches_a_worker_is_applied_once_by_the_main_process(
    served: Served, tmp_path: Path
) -> None:
    config = tmp_path / "zones"
    shutil.copytree(served.config, config)
    args = ("--workers", "2", "--rrl-rate", "0", "--state-dir", str(tmp_path / "state"))
    with DnsdProcess(config, *args) as dnsd:
        dnsd.wait_for_log("started 1 worker process(es)")
        until(lambda: sum("listening on" in line for line in dnsd.lines) == 2, 15, dnsd.output)
        acme = f"hmac-sha256:acme:{served.secret}"
        for tcp in (False, True):
            source = worker_owned(dnsd.port, dnsd, tcp)
            name = f"_acme-challenge.{'tcp' if tcp else 'udp'}.example.test."
            add = f"update add {name} 60 TXT worker-token"
            # BIND's client over UDP, Knot's over TCP; both check the reply's TSIG
            if tcp:
                out = knsupdate(dnsd.port, add, acme, tcp=True, source_port=source)
            else:
                out = nsupdate(dnsd.port, add, acme, source_port=source)
            assert "rc=0" in out and "REFUSED" not in out, out
            # answered once the main process serves it; a worker's copy follows down its
            # pipe a moment later (dig may be handed to either process)
            served_at = functools.partial(dig, dnsd.port, name, "TXT")
            until(lambda at=served_at: at() == ['"worker-token"'], 5, dnsd.output)
        # a refusal comes back from the main process too, signed
        source = worker_owned(dnsd.port, dnsd, False)
        update = dns.update.UpdateMessage(
            "example.test.", keyring=dns.tsig.Key("acme", served.secret, dns.tsig.HMAC_SHA256)
        )
        update.add("not-granted.example.test.", 60, "TXT", "x")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("127.0.0.1", source))
            sock.setblocking(False)
            response = dns.query.udp(update, "127.0.0.1", 5, dnsd.port, sock=sock)
        assert response.rcode() == dns.rcode.REFUSED and response.had_tsig
        code, body = http(dnsd.admin_port, "GET", "/api/v1/events?kind=config")
        assert code == 200, body
        made = [e for e in body["events"] if e["cause"] == "update"]
        assert len(made) == 2, made  # one change each: applied once
        text = metrics(dnsd.admin_port)
        line = 'dnsd_updates_total{rcode="NOERROR",zone="example.test"} '
        counted = [float(x.removeprefix(line)) for x in text.splitlines() if x.startswith(line)]
        assert counted and counted[0] >= 2, counted  # nsupdate may resend one over UDP: no-op
        assert 'dnsd_updates_total{rcode="REFUSED",zone="example.test"} 1.0' in text, text
        records = (config / "example.test.yaml").read_text()
        assert "_acme-challenge.udp: {ttl: 60, TXT: worker-token}" in records
        assert "_acme-challenge.tcp: {ttl: 60, TXT: worker-token}" in records
