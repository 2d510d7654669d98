"""A drill plan's `server:` must not receive the admin token unless the operator named that
server: a plan file may come from anyone, and DNSD_ADMIN_TOKEN goes with every request.
A real second HTTP listener on this machine's non-loopback address records what it got."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

TOKEN = "secret-admin-token"


def non_loopback_address() -> str:
    """This machine's address on its default route (no packet is sent: a UDP connect only
    picks the source address), else one its host name resolves to."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            address = str(s.getsockname()[0])
        except OSError:
            address = "0.0.0.0"
    if not address.startswith(("0.", "127.")):
        return address
    for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
        if not str(info[4][0]).startswith("127."):
            return str(info[4][0])
    raise AssertionError("this machine has no non-loopback IPv4 address to listen on")


class Recorder(ThreadingHTTPServer):
    def __init__(self, host: str) -> None:
        self.seen: list[tuple[str, str | None]] = []  # path, Authorization header

        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder.seen.append((self.path, self.headers.get("Authorization")))
                body = json.dumps({"error": "a stranger's server"}).encode()
                self.send_response(503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__((host, 0), Handler)


@pytest.fixture
def stranger() -> Iterator[Recorder]:
    server = Recorder(non_loopback_address())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def drill(plan: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dnsd", "drill", "run", str(plan), "--dry-run", *args],
        capture_output=True, text=True, timeout=30,
        env=dict(os.environ, DNSD_ADMIN_TOKEN=TOKEN),
    )  # fmt: skip


def test_a_plans_remote_server_gets_no_token_unless_the_command_line_names_it(
    stranger: Recorder, tmp_path: Path
) -> None:
    host, port = stranger.server_address[:2]
    url = f"http://{host}:{port}"
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"""\
name: someone else's plan
server: {url}
dns: 127.0.0.1:53
steps:
  - fault: {{pool: eu}}
    expect: [{{name: www.shop.example, pool: us}}]
""")
    done = drill(plan)
    assert done.returncode == 2, done.stdout + done.stderr
    assert stranger.seen == [], "the plan's server was asked (with the token)"
    assert f"the plan's server {url} is not on this machine" in done.stderr
    assert f"run it with --server {url}" in done.stderr
    assert "nothing was sent or changed" in done.stderr
    # named on the command line, it is the operator's choice: the token goes there
    done = drill(plan, "--server", url)
    assert done.returncode == 2, done.stdout + done.stderr  # a 503, not an admin API
    assert stranger.seen == [("/api/v1/status", f"Bearer {TOKEN}")]
