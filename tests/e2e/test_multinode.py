"""Three dnsd nodes in three regions share health through a real redis-server."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dnslib import EDNS0, DNSRecord

from dnsd.cluster.health_channel import OBS_CHANNEL, OBS_HASH, OVERRIDES_CHANNEL, OVERRIDES_KEY
from dnsd.cluster.seal import Sealer
from dnsd.drill.backend import DemoBackend
from dnsd.explain import ecs_option
from tests.admin_client import http
from tests.dnsclient import udp_raw
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess, Redis

TOKEN = "nodes"
NODES = {"a": "WNAM", "b": "ENAM", "c": "WEU"}
INTERVAL, THRESHOLD = 0.3, 2
ADDRESSES = {"b1": "127.0.0.71", "b2": "127.0.0.72", "d1": "127.0.0.81", "d2": "127.0.0.82"}
ENAM_SUBNET = "12.0.0.0/24"  # the embedded database places it in the US (ENAM)


def config(ports: dict[str, int], quorum_hold: str | None = None) -> str:
    def backend(name: str) -> str:
        return f"{{name: {name}, address: {ADDRESSES[name]}, port: {ports[name]}}}"

    return f"""\
zone: mn.test
soa: {{mname: ns1.mn.test., rname: h.mn.test., minimum: 1}}
records:
  "@": {{NS: ns1.mn.test.}}
  ns1: {{A: 127.0.0.1}}
  www: {{lb: www}}
  dyn: {{lb: dyn}}
monitors:
  web:
    type: http
    path: /healthz
    interval: {INTERVAL}s
    timeout: 0.5s
    healthy_threshold: 2
    unhealthy_threshold: {THRESHOLD}
    sources: [WNAM, ENAM, WEU]{f"{chr(10)}    quorum_hold: {quorum_hold}" if quorum_hold else ""}
pools:
  p: {{monitor: web, backends: [{backend("b1")}, {backend("b2")}]}}
  d1: {{monitor: web, backends: [{backend("d1")}]}}
  d2: {{monitor: web, backends: [{backend("d2")}]}}
load_balancers:
  www: {{ttl: 1, default_pools: [p], max_answers: 2}}
  dyn: {{ttl: 1, steering: dynamic, default_pools: [d1, d2], min_samples: 3}}
"""


@contextlib.contextmanager
def running_cluster(
    directory: Path,
    max_age_s: float = 10,
    redis_ports: Callable[[LoopThread, Redis, list[Callable[[], None]]], dict[str, int]]
    | None = None,
    quorum_hold: str | None = None,
) -> Iterator[dict[str, Any]]:
    """The demo backends, a real redis-server and the three nodes of NODES on `directory`;
    `redis_ports(loop, redis, cleanups)` may put something between a node and Redis (it
    appends how to stop it to `cleanups`). Everything is stopped afterwards."""
    loop = LoopThread()
    backends = {
        n: loop.call(DemoBackend(n, host=a, control_port=None).start())
        for n, a in ADDRESSES.items()
    }
    (directory / "zones").mkdir()
    (directory / "zones" / "mn.yaml").write_text(
        config({n: b.port for n, b in backends.items()}, quorum_hold)
    )
    (directory / "cluster.key").write_text(CLUSTER_KEY)
    redis = Redis().start()
    nodes: dict[str, DnsdProcess] = {}
    cleanups: list[Callable[[], None]] = []
    cluster = {"loop": loop, "backends": backends, "nodes": nodes, "redis": redis, "dir": directory}
    try:
        ports = redis_ports(loop, redis, cleanups) if redis_ports else {}
        start_nodes(nodes, directory, {n: ports.get(n, redis.port) for n in NODES}, max_age_s)
        yield cluster
    finally:
        for proc in nodes.values():
            proc.stop()
        for cleanup in cleanups:
            cleanup()
        redis.kill()
        for b in backends.values():
            loop.call(b.stop())
        loop.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cluster")

    def with_junk(loop: LoopThread, redis: Redis, cleanups: list) -> dict[str, int]:
        redis.cli("hset", OBS_HASH, "junk|field", "not a message")  # must not stop a node starting
        return {}

    with running_cluster(directory, redis_ports=with_junk) as cluster:
        yield cluster


def start_nodes(
    nodes: dict[str, DnsdProcess], directory, redis_ports: dict[str, int], max_age_s: float = 10
) -> None:
    """The three nodes of NODES on `directory`/zones, each reaching Redis on its port, into
    `nodes` (filled as they start, so the caller stops whichever did); back once all share."""
    for name in NODES:
        nodes[name] = start_node(name, directory, redis_ports[name], max_age_s)
    for proc in nodes.values():
        proc.wait_for_log("sharing health as node")


def start_node(name: str, directory, redis_port: int, max_age_s: float = 10) -> DnsdProcess:
    """Node `name` of NODES (its region as its probe source), started."""
    return DnsdProcess(
        directory / "zones", "--redis", f"redis://127.0.0.1:{redis_port}/0",
        "--node", name, "--pop-region", NODES[name], "--rrl-rate", "0",
        "--redis-max-age", str(max_age_s),
        "--redis-key-file", str(directory / "cluster.key"), "--cluster-nodes", "a,b,c",
        env={"DNSD_ADMIN_TOKEN": TOKEN},
    ).__enter__()  # fmt: skip


CLUSTER_KEY = "test-cluster-key-0123456789abcdef"
OBSERVATION = {
    "monitor": "web", "host": "127.0.0.71", "port": 80, "source": "WEU", "state": "healthy",
    "ewma_ms": 1.0, "samples": 3, "last_at": 0.0, "node": "x", "published_at": 0.0,
}  # fmt: skip


def answers(port: int, name: str = "www.mn.test", ecs: str | None = None) -> set[str]:
    q = DNSRecord.question(name)
    if ecs:
        q.add_ar(EDNS0(udp_len=1232, opts=[ecs_option(ecs)]))
    raw = udp_raw(port, q.pack())
    assert raw is not None
    return {str(rr.rdata) for rr in DNSRecord.parse(raw).rr}


def all_nodes(cluster, predicate, timeout: float, name: str = "www.mn.test") -> float:
    started = time.monotonic()
    while True:
        if all(predicate(answers(n.port, name)) for n in cluster["nodes"].values()):
            return time.monotonic() - started
        if time.monotonic() - started >= timeout:
            seen = {k: answers(n.port, name) for k, n in cluster["nodes"].items()}
            logs = {k: n.output[-3000:] for k, n in cluster["nodes"].items()}
            raise AssertionError(f"not within {timeout} s: {seen}\nnode logs: {logs}")
        time.sleep(0.02)


def set_mode(cluster, backend: str, mode: str, source: str | None = None) -> None:
    cluster["loop"].call(cluster["backends"][backend].set_mode(mode, source=source))


def test_each_node_probes_only_as_its_own_region(cluster) -> None:
    all_nodes(cluster, lambda a: a == {"127.0.0.71", "127.0.0.72"}, 10)
    time.sleep(INTERVAL * 3)
    requests = cluster["backends"]["b1"].requests  # one node per region, each its own source
    assert set(requests) == {"WNAM", "ENAM", "WEU"} and min(requests.values()) >= 2
    _, status = http(cluster["nodes"]["a"].admin_port, "GET", "/api/v1/status")
    assert status["bus"]["connected"] is True and status["node"]["pop_region"] == "WNAM"


def test_failing_from_one_region_stays_healthy_from_two_goes_down_everywhere(cluster) -> None:
    set_mode(cluster, "b1", "503", source="WEU")
    time.sleep(INTERVAL * THRESHOLD * 3)
    all_nodes(cluster, lambda a: "127.0.0.71" in a, 1)  # 1 of 3 sources: healthy everywhere
    set_mode(cluster, "b1", "503", source="ENAM")
    took = all_nodes(cluster, lambda a: a == {"127.0.0.72"}, 10)
    assert took <= INTERVAL * THRESHOLD + 1.0
    set_mode(cluster, "b1", "ok")
    all_nodes(cluster, lambda a: a == {"127.0.0.71", "127.0.0.72"}, 10)


def test_dynamic_steering_uses_rtts_measured_by_other_nodes(cluster) -> None:
    set_mode(cluster, "d1", "slow", source="ENAM")  # slow only as seen from ENAM (node b)
    cluster["loop"].call(cluster["backends"]["d1"].set_mode("slow", source="ENAM", slow_ms=150))
    node_a = cluster["nodes"]["a"]
    # The profile's EWMA climbs towards 150 ms a sample at a time, each probe taking the
    # 150 ms: asked until it is over 100 ms (a loaded machine probes later), within a bound.
    started = time.monotonic()
    while True:
        _, info = http(node_a.admin_port, "GET", f"/api/v1/explain?name=dyn.mn.test&ecs={ENAM_SUBNET}")  # fmt: skip
        rtts = {c["pool"]: c["rtt_ms"] for c in info["candidates"]}
        if (rtts["d1"] or 0) > 100 or time.monotonic() - started > INTERVAL * 40:
            break
        time.sleep(INTERVAL)
    assert info["region"] == "ENAM" and rtts["d1"] > 100 > rtts["d2"]  # measured by node b
    assert answers(node_a.port, "dyn.mn.test", ecs=ENAM_SUBNET) == {
        "127.0.0.82"
    }  # d2: lower RTT from ENAM
    set_mode(cluster, "d1", "ok")


def test_an_override_on_one_node_shows_in_the_others(cluster) -> None:
    a, c = cluster["nodes"]["a"], cluster["nodes"]["c"]
    assert (
        http(a.admin_port, "PUT", "/api/v1/overrides/backends/p/b2", {"state": "down"}, TOKEN)[0]
        == 200
    )
    all_nodes(cluster, lambda ans: ans == {"127.0.0.71"}, 2)
    _, status = http(c.admin_port, "GET", "/api/v1/status")
    assert status["overrides"]["backends"] == {"p/b2": "down"}
    assert http(c.admin_port, "DELETE", "/api/v1/overrides/backends/p/b2", token=TOKEN)[0] == 200
    all_nodes(cluster, lambda ans: ans == {"127.0.0.71", "127.0.0.72"}, 2)


def rejected(node: DnsdProcess) -> dict[str, float]:
    _, text = http(node.admin_port, "GET", "/metrics")
    out = {}
    for line in text.splitlines():
        if line.startswith("dnsd_redis_rejected_total{"):
            out[line.split('reason="')[1].split('"')[0]] = float(line.split()[-1])
    return out


def wait_rejected(node: DnsdProcess, before: dict[str, float], wanted: dict[str, int]) -> None:
    deadline = time.monotonic() + 5
    while True:
        now = rejected(node)
        if all(now.get(r, 0) - before.get(r, 0) >= n for r, n in wanted.items()):
            return
        assert time.monotonic() < deadline, (now, before)
        time.sleep(0.05)


def test_a_junk_stored_observation_did_not_stop_the_nodes_starting(cluster) -> None:
    assert rejected(cluster["nodes"]["a"]).get("malformed", 0) >= 1


def test_forged_and_malformed_bus_messages_are_refused_and_change_nothing(cluster) -> None:
    """Whoever can write to Redis but has no cluster key cannot move answers, pin a
    backend, or stop a node's subscriber."""
    a, redis = cluster["nodes"]["a"], cluster["redis"]
    before = rejected(a)
    forged_doc = {"backends": {"p/b1": "down", "p/b2": "down"}, "pools": {},
                  "load_balancers": {}, "updated_at": 1e18, "node": "b"}  # fmt: skip
    forged_obs = {**OBSERVATION, "host": "127.0.0.71", "state": "unhealthy", "node": "b",
                  "published_at": time.time() + 1e9}  # fmt: skip
    sealed = Sealer(CLUSTER_KEY.encode())
    redis.cli("set", OVERRIDES_KEY, json.dumps({"body": json.dumps(forged_doc)}))  # no MAC
    for channel, message in [
        (OVERRIDES_CHANNEL, json.dumps({"body": json.dumps(forged_doc), "mac": "00" * 32})),
        (OBS_CHANNEL, json.dumps({"body": json.dumps(forged_obs)})),
        (OBS_CHANNEL, sealed.seal(forged_obs)),  # right key, a time far in the future
        (OBS_CHANNEL, sealed.seal({**forged_obs, "published_at": time.time(), "node": "z"})),
        (OBS_CHANNEL, "not json"),
        (OBS_CHANNEL, sealed.seal({**OBSERVATION, "state": "sideways"})),
        (OVERRIDES_CHANNEL, "{]"),
    ]:
        redis.cli("publish", channel, message)
    wanted = {"unauthenticated": 2, "future": 1, "node": 1, "malformed": 3}
    wait_rejected(a, before, wanted)
    all_nodes(cluster, lambda ans: ans == {"127.0.0.71", "127.0.0.72"}, 2)  # nothing moved
    _, status = http(a.admin_port, "GET", "/api/v1/status")
    assert status["bus"]["connected"] is True and status["bus"]["authenticated"] is True
    assert status["overrides"]["backends"] == {}
    test_an_override_on_one_node_shows_in_the_others(cluster)  # still sharing


def test_overrides_made_on_two_nodes_merge_and_a_delete_supersedes(cluster) -> None:
    a, c = cluster["nodes"]["a"], cluster["nodes"]["c"]
    put = {"state": "down"}
    assert http(a.admin_port, "PUT", "/api/v1/overrides/pools/d1", put, TOKEN)[0] == 200
    assert http(c.admin_port, "PUT", "/api/v1/overrides/pools/d2", put, TOKEN)[0] == 200
    deadline = time.monotonic() + 3
    while True:  # both changes everywhere: merged entry by entry, not newest document wins
        pools = [http(n.admin_port, "GET", "/api/v1/status")[1]["overrides"]["pools"]
                 for n in cluster["nodes"].values()]  # fmt: skip
        if all(p == {"d1": "down", "d2": "down"} for p in pools):
            break
        assert time.monotonic() < deadline, pools
        time.sleep(0.05)
    for node, pool in ((c, "d1"), (a, "d2")):  # each removed on the other node
        assert (
            http(node.admin_port, "DELETE", f"/api/v1/overrides/pools/{pool}", token=TOKEN)[0]
            == 200
        )
    deadline = time.monotonic() + 3
    while any(http(n.admin_port, "GET", "/api/v1/status")[1]["overrides"]["pools"]
              for n in cluster["nodes"].values()):  # fmt: skip
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_redis_outage_keeps_every_node_answering_and_they_agree_again(cluster) -> None:
    results: list[bool] = []
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            for node in cluster["nodes"].values():
                raw = udp_raw(node.port, DNSRecord.question("www.mn.test").pack(), timeout=1.0)
                results.append(raw is not None and DNSRecord.parse(raw).header.rcode == 0)
            time.sleep(0.01)

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        cluster["redis"].kill()
        time.sleep(1.0)
        set_mode(cluster, "b2", "503")  # every node sees its own source fail…
        time.sleep(INTERVAL * THRESHOLD * 4)
        # …but the quorum needs the others' observations, frozen at "healthy": no flapping
        all_nodes(cluster, lambda a: "127.0.0.72" in a, 1)
        redis = cluster["redis"]
        redis.start()  # same port: the nodes reconnect and share again
        took = all_nodes(cluster, lambda a: a == {"127.0.0.71"}, 15)
        assert took < 15
    finally:
        stop.set()
        thread.join()
        set_mode(cluster, "b2", "ok")
    assert results and all(results), f"{results.count(False)} of {len(results)} queries failed"
    for node in cluster["nodes"].values():
        node.wait_for_log("unreachable")
    _, metrics = http(cluster["nodes"]["c"].admin_port, "GET", "/metrics")
    assert "dnsd_redis_connected 1.0" in metrics


def test_the_bus_needs_a_cluster_key_or_an_explicit_insecure_flag(tmp_path) -> None:
    import sys

    base = [sys.executable, "-m", "dnsd", "serve", "zones", "--redis", "redis://127.0.0.1:1/0",
            "--node", "a", "--pop-region", "WEU", "--admin", "off"]  # fmt: skip
    refused = subprocess.run(base, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "--redis-key-file" in refused.stderr
    (tmp_path / "short.key").write_text("too short")
    short = subprocess.run(
        [*base, "--redis-key-file", str(tmp_path / "short.key")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert short.returncode == 2 and "at least 16 bytes" in short.stderr


def test_a_replayed_sealed_observation_is_refused_and_moves_nothing(cluster) -> None:
    """A replayed observation: an observation captured from Redis (sealed, genuine) and published
    again after the backend recovered must not flip any node's answers."""
    redis = cluster["redis"]
    set_mode(cluster, "b1", "503", source="ENAM")
    set_mode(cluster, "b1", "503", source="WEU")
    all_nodes(cluster, lambda a: a == {"127.0.0.72"}, 10)
    captured = []
    for line in redis.cli("hvals", OBS_HASH).splitlines():
        try:
            body = json.loads(json.loads(line)["body"])
        except (ValueError, KeyError, TypeError):
            continue
        if body.get("host") == "127.0.0.71" and body.get("state") == "unhealthy":
            captured.append(line)
    assert len(captured) >= 2, captured
    set_mode(cluster, "b1", "ok")
    all_nodes(cluster, lambda a: a == {"127.0.0.71", "127.0.0.72"}, 10)
    before = rejected(cluster["nodes"]["a"])
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # replayed over and over for 3 s
        for message in captured:
            redis.cli("publish", OBS_CHANNEL, message)
        for node in cluster["nodes"].values():
            assert answers(node.port) == {"127.0.0.71", "127.0.0.72"}
        time.sleep(0.1)
    wait_rejected(cluster["nodes"]["a"], before, {"replayed": 2})
