"""A lost checker moves no backend (docs/health.md, stale sources): three real nodes on a real
redis-server with a cluster key; one node stopped, its source turns stale and stops voting,
the verdict is held; the node back, it votes again."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.admin_client import http
from tests.e2e.test_multinode import (
    INTERVAL,
    THRESHOLD,
    all_nodes,
    answers,
    running_cluster,
    start_node,
)
from tests.processes import DnsdProcess

MAX_AGE_S = 1.5
BOTH = {"127.0.0.71", "127.0.0.72"}


@pytest.fixture
def cluster(tmp_path):
    with running_cluster(tmp_path, MAX_AGE_S) as cluster:
        yield cluster


def fail_from(cluster, backend: str, *sources: str) -> None:
    for source in sources:
        cluster["loop"].call(cluster["backends"][backend].set_mode("503", source=source))


def backend_status(node: DnsdProcess, name: str) -> dict[str, Any]:
    _, status = http(node.admin_port, "GET", "/api/v1/status")
    return next(b for p in status["pools"] for b in p["backends"] if b["name"] == name)


def wait_status(node: DnsdProcess, name: str, predicate, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        doc = backend_status(node, name)
        if predicate(doc):
            return doc
        assert time.monotonic() < deadline, json.dumps(doc, indent=1)
        time.sleep(0.05)


def hold(nodes: list[DnsdProcess], predicate, seconds: float) -> None:
    """Every answer of every node satisfies `predicate` for `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for node in nodes:
            got = answers(node.port)
            assert predicate(got), f"{got} at {seconds - (deadline - time.monotonic()):.1f} s"
        time.sleep(0.05)


def test_a_lost_checker_never_readmits_a_failing_backend(cluster) -> None:
    nodes = cluster["nodes"]
    all_nodes(cluster, lambda a: a == BOTH, 10)
    fail_from(cluster, "b1", "WNAM", "ENAM")  # 2 of 3 sources: out everywhere
    all_nodes(cluster, lambda a: a == {"127.0.0.72"}, INTERVAL * THRESHOLD + 2)
    nodes.pop("b").stop()  # the ENAM checker is lost; WNAM still fails, WEU passes
    a, c = nodes["a"], nodes["c"]
    stale = wait_status(a, "b1", lambda d: d["sources"]["ENAM"]["state"] == "stale", 3 * MAX_AGE_S)
    assert stale["sources"]["ENAM"]["last_state"] == "unhealthy"
    assert stale["sources"]["ENAM"]["last_seen"] > time.time() - 3 * MAX_AGE_S
    assert stale["quorum"] == "degraded" and stale["probed"] == "unhealthy"
    hold([a, c], lambda got: got == {"127.0.0.72"}, 3 * MAX_AGE_S)  # not readmitted
    nodes["b"] = start_node("b", cluster["dir"], cluster["redis"].port, MAX_AGE_S)
    back = wait_status(a, "b1", lambda d: d["sources"]["ENAM"]["state"] == "unhealthy", 10)
    assert back["quorum"] == "ok"
    cluster["loop"].call(cluster["backends"]["b1"].set_mode("ok"))  # checks pass: it returns
    all_nodes(cluster, lambda got: got == BOTH, INTERVAL * 2 * 2 + 3)


def test_a_lost_checker_never_fails_a_healthy_backend(cluster) -> None:
    nodes = cluster["nodes"]
    fail_from(cluster, "b2", "WEU")  # 1 of 3: healthy everywhere
    time.sleep(INTERVAL * THRESHOLD * 3)
    all_nodes(cluster, lambda a: a == BOTH, 5)
    nodes.pop("a").stop()  # a passing checker (WNAM) is lost: 1 passing, 1 failing left
    b, c = nodes["b"], nodes["c"]
    held = wait_status(b, "b2", lambda d: d["sources"]["WNAM"]["state"] == "stale", 3 * MAX_AGE_S)
    assert held["sources"]["WNAM"]["last_state"] == "healthy"
    assert held["quorum"] == "degraded" and held["probed"] == "healthy"
    hold([b, c], lambda got: got == BOTH, 3 * MAX_AGE_S)
