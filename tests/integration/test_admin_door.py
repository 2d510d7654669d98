"""The admin door under attack, against a real `dnsd serve`:
clients that pipeline requests and never read cannot lock out /healthz or an operator with
a token, and wrong tokens from an address never lock out the right one."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from tests.admin_client import http
from tests.attackers import PipeliningJammer, SlowBodyJammer, request_from
from tests.dnsclient import ask
from tests.processes import DnsdProcess
from tests.waiting import real_time_passes

TOKEN = "door-token-0123456789"
ROUTE = "/api/v1/overrides/pools/us-east"


def timed(*args: Any, **kwargs: Any) -> tuple[tuple[int, Any], float]:
    """request_from(*args, **kwargs) and how long it took."""
    started = time.monotonic()
    result = request_from(*args, **kwargs)
    return result, time.monotonic() - started


def test_200_pipelining_connections_that_never_read_do_not_lock_out_anyone(
    config_copy: Path,
) -> None:
    """200 connections (50 from 127.0.0.1 — the operator's own address — and 150 from 30
    others) pipeline GETs without reading. For 15 s, every half second: /healthz from
    another address and an authenticated override write from 127.0.0.1 each answer in
    under 3 s, and DNS keeps answering."""
    sources = ["127.0.0.1"] * 10 + [f"127.0.7.{i}" for i in range(1, 31)]
    with DnsdProcess(config_copy, "--rrl-rate", "0", env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        port = dnsd.admin_port
        with PipeliningJammer(port, sources, 200) as jammer:
            real_time_passes(3.0, "every place taken, every socket buffer full")
            worst = 0.0
            rounds = 0
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                (status, body), took = timed("127.0.9.1", port, "GET", "/healthz", timeout=5)
                assert status == 200 and body == {"status": "ok"}, (status, body)
                worst = max(worst, took)
                state = "down" if rounds % 2 == 0 else "up"
                (status, body), took = timed(
                    "127.0.0.1", port, "PUT", ROUTE, {"state": state}, TOKEN, timeout=5
                )
                assert status == 200, (status, body)
                worst = max(worst, took)
                assert ask(dnsd.port, "mail.example.test").rr
                rounds += 1
                real_time_passes(0.5, "a round every half second of the attack")
            assert jammer.sent > 1_000_000  # the attack really ran: over 1 MB of requests
        assert worst < 3.0, worst  # on a loaded 2-core machine; the lockout was >= 40 s
        assert rounds >= 10
        # From the jamming address itself: without a token an answer or a 503 that says
        # why (never a hang); with one, served.
        with PipeliningJammer(port, ["127.0.8.1"], 40):
            real_time_passes(1.0, "the jam from this address under way")
            for _ in range(5):
                status, body = request_from("127.0.8.1", port, "GET", "/healthz", timeout=5)
                assert status == 200 or (status == 503 and "valid token" in body["error"])
                status, _ = request_from("127.0.8.1", port, "GET", "/api/v1/audit", token=TOKEN)
                assert status == 200
        idle = []  # 40 silent connections from one address: each past 16 takes an own place
        for _ in range(40):
            s = socket.socket()
            s.bind(("127.0.8.2", 0))
            s.connect(("127.0.0.1", port))
            idle.append(s)
        real_time_passes(0.5, "the idle connections taken")
        for s in idle:
            s.close()
        real_time_passes(0.5, "the jammers' connections gone: every place free again")
        for source in ("127.0.0.1", "127.0.8.1", "127.0.7.1", "127.0.8.2"):
            for _ in range(20):  # more than the per-address cap, one after another
                assert request_from(source, port, "GET", "/healthz")[0] == 200
    assert "Traceback" not in dnsd.output


def test_wrong_tokens_throttle_themselves_but_never_the_right_token(config_copy: Path) -> None:
    """Twenty wrong tokens from 127.0.0.1: after the fifth they get 429 — the valid token
    from the same address is served every time in between."""
    with DnsdProcess(config_copy, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        port = dnsd.admin_port
        answers = []
        for i in range(20):
            answers.append(http(port, "POST", "/api/v1/reload", {}, token=f"wrong-{i}")[0])
            status, body = http(port, "PUT", ROUTE, {"state": "down"}, token=TOKEN)
            assert status == 200, (i, status, body)
        assert answers[:5] == [403] * 5 and set(answers[5:]) == {429}
        status, body = http(port, "POST", "/api/v1/reload", {}, token="wrong-again")
        assert status == 429 and "retry in" in body["error"]
        assert http(port, "POST", "/api/v1/reload", {}, token=TOKEN)[0] == 200
        assert http(port, "DELETE", ROUTE, token=TOKEN)[0] == 200


def test_200_connections_that_trickle_their_bodies_do_not_lock_out_healthz(
    config_copy: Path,
) -> None:
    """200 connections from 200 addresses send a request's headers, then its body a byte
    every half second, never finishing it. /healthz from another address, without a token,
    answers 200 every time (it got 503 three times in four: such a connection could not be
    taken), as does an operator with a token."""
    sources = [f"127.0.11.{i}" for i in range(1, 201)]
    with DnsdProcess(config_copy, "--rrl-rate", "0", env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        port = dnsd.admin_port
        with SlowBodyJammer(port, sources, 200) as jammer:
            time.sleep(2.0)  # every place taken, each connection a second into its body
            answers = []
            for i in range(24):
                answers.append(request_from(f"127.0.9.{i + 1}", port, "GET", "/healthz")[0])
                time.sleep(0.25)
            assert answers == [200] * 24, answers
            status, _ = request_from("127.0.0.1", port, "GET", "/api/v1/audit", token=TOKEN)
            assert status == 200
            assert jammer.trickled > 1000  # the attack really ran
