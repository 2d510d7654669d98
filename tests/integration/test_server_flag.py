"""`--server` takes the admin API as http://HOST:PORT or HOST:PORT; a DNS address or another
scheme is refused with a message saying what it wants (never "unknown url type")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import DnsdProcess


def dnsd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dnsd", *args], capture_output=True, text=True,
                          timeout=30)  # fmt: skip


def test_host_port_is_taken_as_the_admin_url(config_copy: Path) -> None:
    with DnsdProcess(config_copy) as server:
        for given in (f"127.0.0.1:{server.admin_port}", f"http://127.0.0.1:{server.admin_port}/"):
            done = dnsd("explain", "www.example.test", "--server", given, "--json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["lb"] == "web"


@pytest.mark.parametrize(
    "command",
    [("explain", "www.example.test"), ("drill", "run", "plan.yaml"), ("drill", "primary-down")],
)
@pytest.mark.parametrize("given", ["127.0.0.1:53", "udp://127.0.0.1:5353", "127.0.0.1:x"])
def test_what_is_not_an_admin_url_is_refused_clearly(command: tuple[str, ...], given: str) -> None:
    done = dnsd(*command, "--server", given)
    assert done.returncode == 2
    assert "--server wants the admin API's URL, http://HOST:PORT" in done.stderr
    assert "unknown url type" not in done.stderr


def test_nothing_listening_names_what_server_wants() -> None:
    done = dnsd("explain", "www.example.test", "--server", "127.0.0.1:9")
    assert done.returncode == 2
    assert "cannot reach the admin API at http://127.0.0.1:9" in done.stderr
    assert "http://HOST:PORT" in done.stderr
