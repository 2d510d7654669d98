"""The server starts and stops in the order of its named steps (dnsd.server), and that order
keeps its promises: a first health view before any DNS port answers, the ports bound (port
0 made real) before systemd's READY=1 names them, and queries answered until the DNS
listeners close, the last stop step."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dnsd.serve.steps import Step
from tests.conftest import DATA, ServerThread
from tests.dnsclient import make_query, udp_raw


def recording(steps: dict[str, Step | None], look: Callable[[], Any]) -> list[tuple[str, Any]]:
    """Wrap every step this process takes: what `look` sees just before each one runs."""
    seen: list[tuple[str, Any]] = []
    for name, step in list(steps.items()):
        if step is not None:

            def recorded(name: str = name, step: Step = step) -> object:
                seen.append((name, look()))
                return step()

            steps[name] = recorded
    return seen


def test_start_and_stop_run_their_steps_in_order_and_keep_what_the_order_promises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # systemd's, as in production
    notify.bind(str(tmp_path / "notify.sock"))
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify.sock"))
    srv = ServerThread(DATA / "good")
    server = srv.server
    started = recording(server.start_steps, lambda: (server.ready_to_serve, list(server.bound)))
    wire = make_query("mail.example.test", "A").pack()
    stopped = recording(server.stop_steps, lambda: udp_raw(srv.port, wire, timeout=1.0))
    try:
        srv.start()
        names = [name for name, _ in started]
        assert names == [n for n, step in server.start_steps.items() if step is not None]
        assert names[:2] == ["health", "dns listeners"]
        assert "systemd" in names and "admin listener" in names
        before_binding = dict(started)["dns listeners"]
        assert before_binding == (True, [])  # the first probe round done, nothing bound yet
        for name in names[names.index("dns listeners") + 1 :]:
            bound = dict(started)[name][1]
            assert bound and all(port > 0 for _, port in bound), (name, bound)
        notify.settimeout(5)
        assert b"READY=1" in notify.recv(4096)
    finally:
        srv.stop()
        notify.close()
    names = [name for name, _ in stopped]
    assert names[0] == "systemd" and names[-1] == "dns listeners"
    assert all(reply is not None for _, reply in stopped), "a query went unanswered"
