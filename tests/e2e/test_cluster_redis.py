"""Production Redis for a dnsd cluster, with real redis-server processes on loopback: nodes
follow a Sentinel failover, config sync survives a Redis restarted empty and ignores (and
counts) unsealed writes, TLS with a CA made here (the wrong CA and the wrong name are
refused, clearly), and an ACL user with the minimal command set whose password shows
nowhere."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dnsd.cluster.config_channel import LOG_KEY, SEQ_KEY
from tests.admin_client import http
from tests.processes import DnsdProcess
from tests.redis_servers import RedisServer, SentinelServer
from tests.tls_certs import make_ca, make_server_cert

TOKEN = "cluster-token"
KEY = "cluster-redis-key-0123456789abcdef"
PASSWORD = "s3cret-Pa55-for-dnsd"
# The minimal command set dnsd needs (docs/operations.md "Production Redis").
ACL = (
    f"user dnsd on >{PASSWORD} ~dnsd:* &dnsd:* resetchannels &dnsd:* -@all +ping +get +set "
    "+time +hgetall +hscan +hset +hdel +publish +subscribe +xadd +xrange +xrevrange +xlen +xdel +watch +unwatch "
    "+multi +exec +discard"
)
CONFIG = """\
zone: c.test
soa: {mname: ns1.c.test., rname: h.c.test., minimum: 1}
records:
  "@": {NS: ns1.c.test.}
  ns1: {A: 127.0.0.1}
  www: {lb: www}
pools:
  p1: {backends: [{name: b1, address: 192.0.2.1}, {name: b2, address: 192.0.2.2}]}
load_balancers:
  www: {ttl: 1, default_pools: [p1]}
"""
REGION = {"a": "WNAM", "b": "ENAM", "c": "WEU"}


def node(tmp: Path, name: str, url: str, *extra: str) -> DnsdProcess:
    zones = tmp / name / "zones"
    zones.mkdir(parents=True, exist_ok=True)
    if not (zones / "c.yaml").exists():
        (zones / "c.yaml").write_text(CONFIG)
    (tmp / "cluster.key").write_text(KEY)
    return DnsdProcess(
        zones, "--redis", url, "--node", name, "--pop-region", REGION[name],
        "--redis-key-file", str(tmp / "cluster.key"), "--state-dir", str(tmp / name / "state"),
        *extra, env={"DNSD_ADMIN_TOKEN": TOKEN},
    ).__enter__()  # fmt: skip


def dig(port: int, name: str) -> list[str]:
    done = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), name, "A", "+short", "+tries=1", "+time=1"],
        capture_output=True, text=True, timeout=5,
    )  # fmt: skip
    return sorted(done.stdout.split())


def until(check: Callable[[], Any], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - started


def status(proc: DnsdProcess) -> dict[str, Any]:
    return http(proc.admin_port, "GET", "/api/v1/status")[1]


def sync_of(proc: DnsdProcess) -> dict[str, Any]:
    return status(proc)["bus"]["config_sync"]


def put_record(proc: DnsdProcess, name: str, address: str) -> None:
    route = f"/api/v1/config/zones/c.test/records/{name}"
    code, body = http(proc.admin_port, "PUT", route, {"A": [address], "ttl": 5}, token=TOKEN)
    assert code in (200, 201), body


def rejected(*procs: DnsdProcess) -> int:
    return sum(sum(status(p)["bus"]["rejected"].values()) for p in procs)


def converged(*procs: DnsdProcess) -> bool:
    syncs = [sync_of(p) for p in procs]
    return all(s["state"] == "in_sync" for s in syncs) and len({s["digest"] for s in syncs}) == 1


@pytest.fixture
def cleanup() -> Iterator[list[Any]]:
    """Everything started here is killed at the end, passed or not."""
    started: list[Any] = []
    yield started
    for thing in reversed(started):
        if isinstance(thing, DnsdProcess):
            thing.stop()
        else:
            thing.kill()


def two_nodes(
    tmp_path: Path, cleanup: list[Any], *b_extra: str
) -> tuple[RedisServer, DnsdProcess, DnsdProcess]:
    """A redis-server and nodes a and b sharing it, both connected."""
    redis = RedisServer(tmp_path).start()
    cleanup.append(redis)
    url = f"redis://127.0.0.1:{redis.port}/0"
    a = node(tmp_path, "a", url)
    cleanup.append(a)
    b = node(tmp_path, "b", url, *b_extra)
    cleanup.append(b)
    for proc in (a, b):
        proc.wait_for_log("sharing health as node")
    return redis, a, b


def test_nodes_follow_a_sentinel_failover(tmp_path: Path, cleanup: list[Any]) -> None:
    primary = RedisServer(tmp_path).start()
    cleanup.append(primary)
    replica = RedisServer(tmp_path, f"replicaof 127.0.0.1 {primary.port}").start()
    cleanup.append(replica)
    sentinels = [SentinelServer(tmp_path, "dnsdtest", primary.port) for _ in range(3)]
    for sentinel in sentinels:
        cleanup.append(sentinel.start())
    until(lambda: "master_link_status:up" in replica.cli("info", "replication"), 10, "replica")
    until(lambda: all("num-other-sentinels\n2" in s.cli("sentinel", "master", "dnsdtest")
                      for s in sentinels), 15, "sentinels know each other")  # fmt: skip
    url = "redis+sentinel://" + ",".join(f"127.0.0.1:{s.port}" for s in sentinels) + "/dnsdtest/0"
    a = node(tmp_path, "a", url)
    cleanup.append(a)
    b = node(tmp_path, "b", url)
    cleanup.append(b)
    for proc in (a, b):
        proc.wait_for_log("sharing health as node")
        assert status(proc)["bus"]["primary"] == f"127.0.0.1:{primary.port}"
    put_record(a, "before", "192.0.2.10")
    until(lambda: dig(b.port, "before.c.test") == ["192.0.2.10"], 5, "a change before failover")

    primary.kill()
    killed = time.monotonic()
    until(lambda: sentinels[0].primary("dnsdtest") == replica.port, 30, "promotion")
    promoted = time.monotonic() - killed
    new = f"127.0.0.1:{replica.port}"
    until(lambda: all(status(p)["bus"]["primary"] == new and status(p)["bus"]["connected"]
                      for p in (a, b)), 15, "both nodes on the new primary")  # fmt: skip
    # an override made on a reaches b within 10 s
    put = time.monotonic()
    code, _ = http(
        a.admin_port, "PUT", "/api/v1/overrides/backends/p1/b2", {"state": "down"}, TOKEN
    )
    assert code == 200
    override_s = until(lambda: status(b)["overrides"]["backends"] == {"p1/b2": "down"}, 10,
                       "the override on b")  # fmt: skip
    # a config API change on a is served by b
    put = time.monotonic()
    put_record(a, "after", "192.0.2.11")
    until(lambda: dig(b.port, "after.c.test") == ["192.0.2.11"], 10, "a change after failover")
    config_s = time.monotonic() - put
    until(lambda: converged(a, b), 5, "the same config digest")
    print(f"promotion {promoted:.2f} s after the kill; override on b {override_s:.2f} s, "
          f"config change served by b {config_s:.2f} s after it was made")  # fmt: skip
    assert f"(primary {new})" in a.output + b.output  # the log says where it went
    for proc in (a, b):  # the move is counted, though it was noticed as a lost connection
        assert "dnsd_redis_failovers_total 1.0" in http(proc.admin_port, "GET", "/metrics")[1]
        assert f"failover: the primary is now {new}" in proc.output


def test_config_sync_survives_redis_restarted_empty_and_ignores_unsealed_writes(
    tmp_path: Path, cleanup: list[Any]
) -> None:
    redis, a, b = two_nodes(tmp_path, cleanup)
    put_record(a, "r1", "192.0.2.21")
    until(lambda: dig(b.port, "r1.c.test") == ["192.0.2.21"], 5, "r1 on b")
    put_record(b, "r1", "192.0.2.22")  # an entry edited twice
    until(lambda: dig(a.port, "r1.c.test") == ["192.0.2.22"], 5, "r1 edited, on a")
    until(lambda: converged(a, b), 5, "converged before the restart")
    assert sync_of(a)["seq"] == 2

    redis.kill()  # no persistence: it comes back empty
    until(lambda: not status(a)["bus"]["connected"], 15, "a notices")
    put_record(a, "r2", "192.0.2.23")  # written while Redis is away
    redis.start()
    put_record(b, "r1", "192.0.2.24")  # the already-edited entry, right after the restart
    took = until(lambda: dig(a.port, "r1.c.test") == ["192.0.2.24"]
                 and dig(b.port, "r2.c.test") == ["192.0.2.23"], 15, "after the restart")  # fmt: skip
    until(lambda: converged(a, b), 10, "the same digest after the restart")
    assert sync_of(a)["seq"] == sync_of(b)["seq"] >= 4
    assert int(redis.cli("xlen", LOG_KEY)) == sync_of(a)["seq"]  # Redis re-seeded
    print(f"after Redis restarted empty: both nodes serve every change within {took:.2f} s")

    # an unsealed write to the counter changes nothing and is counted
    before = rejected(a, b)
    digest = sync_of(a)["digest"]
    redis.cli("set", SEQ_KEY, "0")
    until(lambda: rejected(a, b) > before, 5, "the unsealed counter counted as rejected")
    until(lambda: redis.cli("get", SEQ_KEY).strip() != "0", 5, "the counter rewritten")
    assert sync_of(a)["digest"] == digest and converged(a, b)
    put_record(a, "r1", "192.0.2.25")  # the old bug: a later edit of an edited entry was lost
    until(lambda: dig(b.port, "r1.c.test") == ["192.0.2.25"], 5, "an edit after the reset")
    # an unsealed record in the history is refused, removed, and changes nothing
    before = rejected(a, b)
    forged = json.dumps({"body": json.dumps({"seq": 99, "prev": "0" * 64, "digest": "x",
                         "origin": "a", "at": 1.0, "node": "a",
                         "entries": [{"route": "zones/c.test/records/r1",
                                      "body": {"A": ["203.0.113.66"]}}]})})  # fmt: skip
    redis.cli("xadd", LOG_KEY, "*", "record", forged)
    until(lambda: rejected(a, b) > before, 5, "the forged record counted")
    time.sleep(1.5)
    assert dig(a.port, "r1.c.test") == dig(b.port, "r1.c.test") == ["192.0.2.25"]
    until(lambda: converged(a, b), 5, "still the same digest")
    metrics = http(a.admin_port, "GET", "/metrics")[1]
    assert "dnsd_config_sync_diverged 0.0" in metrics
    assert (
        'dnsd_redis_rejected_total{reason="malformed"}'
        in metrics + http(b.admin_port, "GET", "/metrics")[1]
    )


# -- TLS --------------------------------------------------------------------------------------
def test_tls_with_the_right_ca_works_and_a_wrong_ca_or_name_is_refused(
    tmp_path: Path, cleanup: list[Any]
) -> None:
    ca, ca_cert, ca_key = make_ca(tmp_path, "cluster-ca")
    wrong_ca, _, _ = make_ca(tmp_path, "someone-else")
    cert, key = make_server_cert(tmp_path, ca_cert, ca_key)
    redis = RedisServer(
        tmp_path, f"tls-cert-file {cert}", f"tls-key-file {key}", f"tls-ca-cert-file {ca}",
        "tls-auth-clients no", tls=True, cli=("--tls", "--cacert", str(ca), "-h", "localhost"),
    ).start()  # fmt: skip
    cleanup.append(redis)
    url = f"rediss://localhost:{redis.port}/0"
    a = node(tmp_path, "a", url, "--redis-ca-file", str(ca))
    cleanup.append(a)
    b = node(tmp_path, "b", url, "--redis-ca-file", str(ca))
    cleanup.append(b)
    for proc in (a, b):
        proc.wait_for_log("sharing health as node")
        assert status(proc)["bus"]["tls"] is True
    put_record(a, "tls", "192.0.2.30")
    until(lambda: dig(b.port, "tls.c.test") == ["192.0.2.30"], 5, "a change over TLS")

    wrong = node(tmp_path, "c", url, "--redis-ca-file", str(wrong_ca))
    cleanup.append(wrong)
    wrong.wait_for_log("certificate")
    bus = status(wrong)["bus"]
    assert bus["connected"] is False and "TLS: the server's certificate was refused" in bus["error"]
    assert "self-signed certificate in certificate chain" in bus["error"], bus["error"]
    assert "redis rediss://localhost" in wrong.output and "certificate was refused" in wrong.output
    wrong.stop()
    # the right CA, the wrong name: the certificate names localhost, not 127.0.0.1
    shutil_rmtree(tmp_path / "c" / "state")
    by_address = node(
        tmp_path, "c", f"rediss://127.0.0.1:{redis.port}/0", "--redis-ca-file", str(ca)
    )
    cleanup.append(by_address)
    by_address.wait_for_log("certificate")
    error = status(by_address)["bus"]["error"]
    assert status(by_address)["bus"]["connected"] is False
    assert "IP address mismatch" in error or "hostname" in error.lower(), error


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# -- ACL --------------------------------------------------------------------------------------
def test_an_acl_user_with_the_minimal_commands_and_its_password_shown_nowhere(
    tmp_path: Path, cleanup: list[Any]
) -> None:
    redis = RedisServer(
        tmp_path, "user default off", "user admin on >admin-pw ~* &* +@all", ACL,
        cli=("--user", "admin", "--pass", "admin-pw"),
    ).start()  # fmt: skip
    cleanup.append(redis)
    url = f"redis://dnsd:{PASSWORD}@127.0.0.1:{redis.port}/0"
    a = node(tmp_path, "a", url)
    cleanup.append(a)
    b = node(tmp_path, "b", url)
    cleanup.append(b)
    for proc in (a, b):
        proc.wait_for_log("sharing health as node")
    put_record(a, "acl", "192.0.2.40")
    until(lambda: dig(b.port, "acl.c.test") == ["192.0.2.40"], 5, "a change as the ACL user")
    code, _ = http(
        b.admin_port, "PUT", "/api/v1/overrides/backends/p1/b2", {"state": "down"}, TOKEN
    )
    assert code == 200
    until(lambda: status(a)["overrides"]["backends"] == {"p1/b2": "down"}, 5, "override")
    until(lambda: converged(a, b), 5, "same digest")
    # nothing dnsd sent was refused by the ACL
    assert redis.cli("acl", "log").strip() == "", redis.cli("acl", "log")
    # the password: not in the logs, the status, the metrics, or `dnsd config show`
    shown = subprocess.run(
        [sys.executable, "-m", "dnsd", "config", "show", "--redis", url],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert "dnsd:***@" in shown.stdout, shown.stdout + shown.stderr
    for proc in (a, b):
        texts = [proc.output, json.dumps(status(proc)), http(proc.admin_port, "GET", "/metrics")[1]]
        assert all(PASSWORD not in text for text in texts)
        assert "dnsd:***@" in json.dumps(status(proc))
    assert PASSWORD not in shown.stdout + shown.stderr


def test_a_diverged_node_says_so_in_a_webhook_and_comes_back(
    tmp_path: Path, cleanup: list[Any]
) -> None:
    from tests.integration.test_webhooks import Receiver, server_file
    from tests.loop_thread import LoopThread

    loop = LoopThread()
    cleanup.append(type("Closer", (), {"kill": lambda self: loop.close()})())
    receiver = Receiver(loop)
    hooks = server_file(tmp_path, loop.call(receiver.start()), "config_sync")
    _, a, b = two_nodes(tmp_path, cleanup, "--config", str(hooks))
    # b's directory no longer matches: a shared change that needs pool p1 is refused there
    zone = tmp_path / "b" / "zones" / "c.yaml"
    zone.write_text(CONFIG.replace("p1", "p9"))
    assert http(b.admin_port, "POST", "/api/v1/reload", token=TOKEN)[0] == 200
    lb = {"default_pools": ["p1"], "ttl": 2}
    assert http(a.admin_port, "PUT", "/api/v1/config/load_balancers/www", lb, TOKEN)[0] == 200
    until(lambda: sync_of(b)["state"] == "diverged", 5, "b diverged")
    until(lambda: receiver.received, 5, "the config_sync webhook")
    event = json.loads(receiver.received[0][1])
    assert event["event"] == "config_sync" and event["state"] == "diverged", event
    assert "refused" in event["reason"]
    assert "dnsd_config_sync_diverged 1.0" in http(b.admin_port, "GET", "/metrics")[1]
    assert dig(b.port, "www.c.test")  # still serving its last good config
    page = http(b.admin_port, "GET", "/")[1]
    assert "CONFIG DIVERGED: a shared change" in page, page[:2000]
    # fixed: the next change in the history brings b back in step
    zone.write_text(CONFIG)
    assert http(b.admin_port, "POST", "/api/v1/reload", token=TOKEN)[0] == 200
    put_record(a, "again", "192.0.2.50")
    until(lambda: converged(a, b), 10, "b back in step")
    assert dig(b.port, "again.c.test") == ["192.0.2.50"]
    until(lambda: len(receiver.received) >= 2, 5, "the in_sync webhook")
    assert json.loads(receiver.received[-1][1])["state"] == "in_sync"


# -- a skewed clock ---------------------------------------------------------------------------
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def skewed(seconds: int) -> dict[str, str]:
    """The environment that runs a process with its wall clock `seconds` off (libfaketime,
    installed by scripts/install-test-deps.sh); its monotonic clock stays true."""
    assert FAKETIME_LIB.exists(), "libfaketime is installed by `make deps` (Debian faketime)"
    return {"LD_PRELOAD": str(FAKETIME_LIB), "FAKETIME": f"{seconds:+d}s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"}  # fmt: skip


def test_a_node_whose_clock_is_behind_deletes_nothing_and_receives_everything(
    tmp_path: Path, cleanup: list[Any]
) -> None:
    """A node 30 s behind used to refuse the other's config records as "from the future"
    and delete them from Redis every second, and to refuse its override documents: times
    are now checked against the Redis server's clock, and the config history is ordered by
    its chain alone."""
    redis = RedisServer(tmp_path).start()
    cleanup.append(redis)
    url = f"redis://127.0.0.1:{redis.port}/0"
    a = node(tmp_path, "a", url)
    cleanup.append(a)
    zones = tmp_path / "b" / "zones"
    zones.mkdir(parents=True)
    (zones / "c.yaml").write_text(CONFIG)
    b = DnsdProcess(
        zones, "--redis", url, "--node", "b", "--pop-region", REGION["b"],
        "--redis-key-file", str(tmp_path / "cluster.key"), "--state-dir", str(tmp_path / "b" / "state"),
        env={"DNSD_ADMIN_TOKEN": TOKEN, **skewed(-30)},
    ).__enter__()  # fmt: skip
    cleanup.append(b)
    for proc in (a, b):
        proc.wait_for_log("sharing health as node")
    put_record(a, "ahead", "192.0.2.61")
    until(lambda: dig(b.port, "ahead.c.test") == ["192.0.2.61"], 5, "a's change served by b")
    put_record(b, "behind", "192.0.2.62")
    until(lambda: dig(a.port, "behind.c.test") == ["192.0.2.62"], 5, "b's change served by a")
    until(lambda: converged(a, b), 5, "the same digest")
    time.sleep(2.5)  # the lagging node used to delete a's records every second
    assert int(redis.cli("xlen", LOG_KEY)) == sync_of(a)["seq"] == sync_of(b)["seq"] == 2
    assert converged(a, b)
    code, body = http(
        a.admin_port, "PUT", "/api/v1/overrides/backends/p1/b2", {"state": "down"}, TOKEN
    )
    assert code == 200, body
    until(lambda: status(b)["overrides"]["backends"] == {"p1/b2": "down"}, 8, "a's override on b")
    assert status(a)["bus"]["rejected"] == status(b)["bus"]["rejected"] == {}


# -- junk in Redis ----------------------------------------------------------------------------
JUNK = 100_000
FILL = (  # JUNK fields in the observations hash and JUNK entries in the config stream
    "for i = 1, tonumber(ARGV[1]) do "
    "redis.call('HSET', KEYS[1], 'junk|' .. i, '{\"body\": \"x\"}') "
    "redis.call('XADD', KEYS[2], '*', 'record', 'junk') end return 1"
)


def test_junk_in_redis_is_read_in_pages_counted_and_removed(
    tmp_path: Path, cleanup: list[Any]
) -> None:
    """100,000 unsealed fields in the observations hash and 100,000 unsealed entries in the
    config stream (written by whoever can write to Redis, without the key) used to make
    every reconnect's HGETALL and every config check's XRANGE outlast the 2 s socket
    timeout (300,000 in the report; 100,000 already stall the config sync for good). They are now
    read in pages, counted, skipped and deleted."""
    redis, a, b = two_nodes(tmp_path, cleanup)
    put_record(a, "before", "192.0.2.71")
    until(lambda: dig(b.port, "before.c.test") == ["192.0.2.71"], 5, "a change before the junk")
    redis.cli("eval", FILL, "2", "dnsd:observations", LOG_KEY, str(JUNK))
    redis.cli("client", "kill", "type", "pubsub")  # every node reconnects and reads it all
    put_record(a, "after", "192.0.2.72")
    # Not stalled for good (the bound is generous: about 18 s on a quiet 2-core machine)
    took = until(lambda: dig(b.port, "after.c.test") == ["192.0.2.72"], 60, "a change after")
    code, body = http(
        a.admin_port, "PUT", "/api/v1/overrides/backends/p1/b2", {"state": "down"}, TOKEN
    )
    assert code == 200, body
    until(lambda: status(b)["overrides"]["backends"] == {"p1/b2": "down"}, 5, "the override on b")
    until(lambda: converged(a, b), 10, "the same digest")
    assert int(redis.cli("xlen", LOG_KEY)) == sync_of(a)["seq"] == 2  # the junk is gone
    until(lambda: int(redis.cli("hlen", "dnsd:observations")) < 100, 10, "junk fields gone")
    redis.cli("client", "kill", "type", "pubsub")  # and the next reconnect is quick
    until(lambda: all(status(p)["bus"]["connected"] for p in (a, b)), 5, "reconnected")
    metrics = http(a.admin_port, "GET", "/metrics")[1] + http(b.admin_port, "GET", "/metrics")[1]
    assert 'dnsd_redis_rejected_total{reason="malformed"}' in metrics
    assert rejected(a, b) >= JUNK  # every field counted (by whoever read it first)
    print(f"with {JUNK} junk fields and entries: a change served by b {took:.2f} s later")


def test_a_trimmed_history_is_restored_and_lagging_and_new_nodes_converge(
    tmp_path: Path, cleanup: list[Any]
) -> None:
    """`XTRIM dnsd:config:log MAXLEN 1` used to leave a node that lagged, and a new one,
    "diverged" for good, while the nodes holding the whole history never put it back: a
    node whose copy holds what the stream lacks now restores it."""
    redis, a, b = two_nodes(tmp_path, cleanup)
    url = f"redis://127.0.0.1:{redis.port}/0"
    for i in (1, 2, 3):
        put_record(a, f"t{i}", f"192.0.2.8{i}")
    until(lambda: converged(a, b) and sync_of(b)["seq"] == 3, 5, "b has three records")
    b.stop()  # b lags behind by the next change
    put_record(a, "t4", "192.0.2.84")
    until(lambda: int(redis.cli("xlen", LOG_KEY)) == 4, 5, "the fourth record shared")
    redis.cli("xtrim", LOG_KEY, "maxlen", "1")
    until(lambda: int(redis.cli("xlen", LOG_KEY)) == 4, 5, "a restores the whole history")
    b = node(tmp_path, "b", url)  # its state directory holds seq 3
    cleanup.append(b)
    c = node(tmp_path, "c", url)  # a new node: nothing yet
    cleanup.append(c)
    until(lambda: converged(a, b, c), 15, "the lagging and the new node in step")
    assert sync_of(b)["seq"] == sync_of(c)["seq"] == 4
    assert dig(b.port, "t4.c.test") == ["192.0.2.84"]
    assert dig(c.port, "t1.c.test") == ["192.0.2.81"]
