"""systemd readiness: a Unix datagram socket standing in for systemd's
NOTIFY_SOCKET hears READY=1 once dnsd is ready, WATCHDOG=1 at half of WATCHDOG_USEC,
RELOADING=1 then READY=1 around a reload, STOPPING=1 on SIGTERM; and the shipped unit
passes `systemd-analyze verify`."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import DATA
from tests.processes import DnsdProcess

ROOT = Path(__file__).parent.parent.parent


def read_all(sock: socket.socket, seconds: float) -> list[tuple[float, str]]:
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            out.append((time.monotonic(), sock.recv(4096).decode()))
        except TimeoutError:
            break
    return out


def test_ready_watchdog_reload_and_stop_reach_the_notify_socket(tmp_path: Path) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        env = {"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "200000"}  # pings every 0.1 s
        dnsd = DnsdProcess(DATA / "good", env=env)
        with dnsd:
            first = read_all(sock, 1.5)
            assert any("listening on" in line for line in dnsd.lines)
            ready = [t for t, m in first if "READY=1" in m]
            assert ready and "STATUS=serving 2 zone(s)" in next(
                m for _, m in first if "READY=1" in m
            )
            pings = [t for t, m in first if m == "WATCHDOG=1" and t >= ready[0]]
            assert len(pings) >= 5  # about ten in the second after READY
            dnsd.signal(signal.SIGHUP)
            around = [m for _, m in read_all(sock, 1.0) if m != "WATCHDOG=1"]
            assert around[0].startswith("RELOADING=1\nMONOTONIC_USEC=")
            assert around[1].startswith("READY=1\nSTATUS=reloaded: generation 2")
            dnsd.signal(signal.SIGTERM)
            last = [m for _, m in read_all(sock, 2.0) if m != "WATCHDOG=1"]
            assert "STOPPING=1" in last
            assert dnsd.stop() == 0


def test_the_shipped_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is installed by `make test` (Debian package systemd)"
    unit = tmp_path / "dnsd.service"
    unit.write_text((ROOT / "docs" / "dnsd.service").read_text())
    fake = tmp_path / "dnsd"  # ExecStart must name an executable file
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    unit.write_text(unit.read_text().replace("/usr/local/bin/dnsd", str(fake)))
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    problems = [line for line in done.stderr.splitlines() if "dnsd.service" in line]
    assert done.returncode == 0 and not problems, done.stderr


def unit_settings(text: str) -> dict[str, list[str]]:
    """Key → every value it is given in the unit (repeated keys add up, as in systemd)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_the_shipped_unit_leaves_the_config_directory_writable() -> None:
    """ProtectSystem=strict makes everything but /dev, /proc, /sys read-only: the config
    API and cluster config sync write the zones directory, so the unit must open it again
    (ReadWritePaths) and hand it to its DynamicUser."""
    settings = unit_settings((ROOT / "docs" / "dnsd.service").read_text())
    argv = settings["ExecStart"][0].split()
    config_dir = argv[argv.index("serve") + 1]
    assert config_dir.startswith("/etc/")
    assert settings.get("ProtectSystem") == ["strict"]
    writable = [p for v in settings.get("ReadWritePaths", []) for p in v.split()]
    assert any(
        config_dir == p.lstrip("-") or config_dir.startswith(p.lstrip("-").rstrip("/") + "/")
        for p in writable
    ), f"{config_dir} is read-only under ProtectSystem=strict: {writable}"
    if settings.get("DynamicUser") == ["yes"]:
        assert any(f"chown -R dnsd:dnsd {config_dir}" in v for v in settings["ExecStartPre"])
