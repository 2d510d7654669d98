"""docker/ for real: the images built (from local stand-ins of the upstream base
images where Docker Hub is out of reach), the three-region compose topology brought up,
and checked through its published ports. Marked `docker`: `-m 'not docker'` deselects it on
a machine without a Docker engine."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
COMPOSE = ["docker-compose", "-f", str(ROOT / "docker" / "compose.yaml"), "-p", "dnsdtest"]
OFFLINE = {
    "DNSD_PYTHON_IMAGE": "dnsd-offline/python:3.11-slim",
    "DNSD_REDIS_IMAGE": "dnsd-offline/redis:7",
    "DNSD_DEBIAN_IMAGE": "dnsd-offline/debian:bookworm",
}
TOKEN = (ROOT / "docker" / "admin-token.txt").read_text().strip()
TTL_S, INTERVAL_S, THRESHOLD = 10, 2, 2  # docker/zones/gslb.test.yaml
BOUND_S = TTL_S + INTERVAL_S * THRESHOLD + 1 + 2  # + probe timeout, + sharing

pytestmark = pytest.mark.docker


def run(*argv: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **OFFLINE}
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=env, check=check
    )


def dig(name: str, *extra: str) -> tuple[str, list[str]]:
    out = run(
        "dig", "@127.0.0.1", "-p", "5300", name, "+tries=1", "+time=3", *extra, check=False
    ).stdout
    status = out.split("status: ", 1)[1].split(",", 1)[0] if "status: " in out else "TIMEOUT"
    answers = [
        line.split()[-1]
        for line in out.splitlines()
        if "\tIN\tA\t" in line and not line.startswith(";")
    ]
    return status, answers


def admin(port: int, method: str, path: str, body: object = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def engine():
    """A Docker engine: the one running, or a dockerd started (and stopped) here."""
    started = None
    if run("docker", "info", check=False).returncode != 0:
        started = subprocess.Popen(
            ["dockerd"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while run("docker", "info", check=False).returncode != 0:
            assert time.monotonic() < deadline, "dockerd did not start"
            time.sleep(0.5)
    yield
    if started is not None:
        started.terminate()
        started.wait(timeout=30)


@pytest.fixture(scope="module")
def topology(engine):
    run("bash", str(ROOT / "docker" / "offline-images.sh"), timeout=900)
    run(*COMPOSE, "up", "-d", "--build", timeout=900)
    try:
        deadline = time.monotonic() + 90
        while dig("www.gslb.test")[0] != "NOERROR":
            assert time.monotonic() < deadline, run(
                *COMPOSE, "logs", "--tail", "20", check=False
            ).stdout[-3000:]
            time.sleep(1)
        yield
    finally:
        run(*COMPOSE, "down", "-v", "--remove-orphans", timeout=300, check=False)


def control(mode: str) -> None:
    request = urllib.request.Request("http://127.0.0.1:8054/backends/b1", data=json.dumps({"mode": mode}).encode(), method="POST")  # fmt: skip
    urllib.request.urlopen(request, timeout=5).read()


def test_the_compose_drill_plan_in_docs_passes(topology, tmp_path) -> None:
    """docs/drills/compose.yaml, run as its comment says: in a container on the compose
    network. Before the test below, which kills and stops nodes."""
    out = tmp_path / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o777)  # the image runs as an unprivileged user
    done = run(
        "docker", "run", "--rm", "--network", "dnsdtest_gslb",
        "-v", f"{ROOT / 'docs' / 'drills'}:/plans:ro", "-v", f"{out}:/out",
        "-e", f"DNSD_ADMIN_TOKEN={TOKEN}", "dnsd-node:local",
        "drill", "run", "/plans/compose.yaml", "--server", "http://172.30.0.21:8053",
        "--junit", "/out/junit.xml", "--quiet",
        timeout=600, check=False,
    )  # fmt: skip
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "6/6 expectations held: PASS" in done.stdout
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("tests") == "6" and suite.get("failures") == "0"


def test_the_topology_answers_fails_over_and_shares_overrides(topology) -> None:
    status, answers = dig("www.gslb.test")
    assert status == "NOERROR" and answers and set(answers) <= {"172.30.0.11", "172.30.0.12"}
    # backend b1 fails through the control port: the answer leaves it within the bound
    control("503")
    time.sleep(BOUND_S)
    seen = {a for _ in range(20) for a in dig("www.gslb.test")[1]}
    assert seen == {"172.30.0.12"}, seen
    control("ok")
    # node-a killed: names keep resolving through unbound and the other two nodes
    run(*COMPOSE, "kill", "node-a")
    results = [dig(f"n{random.randrange(10**9)}.gslb.test")[0] for _ in range(20)]
    assert results == ["NXDOMAIN"] * 20, results  # each one asked upstream, none lost
    # an override set on node-b's admin API reaches node-c through Redis
    admin(8062, "PUT", "/api/v1/overrides/pools/eu", {"state": "down"})
    deadline = time.monotonic() + 10
    while admin(8063, "GET", "/api/v1/status")["overrides"].get("pools", {}).get("eu") != "down":
        assert time.monotonic() < deadline, admin(8063, "GET", "/api/v1/status")["overrides"]
        time.sleep(0.2)
    # SIGTERM stops a node in under 2 s (dnsd handles it as PID 1): docker sends SIGKILL
    # after the 2 s grace, and a killed container's exit code is 137 (128 + 9). Docker
    # times the grace itself, so a loaded machine's slow docker-compose does not count.
    container = run(*COMPOSE, "ps", "-q", "node-c").stdout.strip()
    run(*COMPOSE, "stop", "-t", "2", "node-c")
    state = json.loads(run("docker", "inspect", "-f", "{{json .State}}", container).stdout)
    assert not state["Running"] and state["ExitCode"] != 137, state


def test_down_leaves_nothing_behind(topology) -> None:
    run(*COMPOSE, "down", "-v", "--remove-orphans", timeout=300)
    for kind in ("ps -a", "network ls", "volume ls"):
        listed = run(
            "docker", *kind.split(), "--filter", "label=com.docker.compose.project=dnsdtest", "-q"
        ).stdout
        assert listed.strip() == "", (kind, listed)
