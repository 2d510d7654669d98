"""Reload: a good config is swapped in atomically; a broken one keeps the old one serving."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.conftest import ServerThread
from tests.dnsclient import ask
from tests.processes import DnsdProcess


def mail_address(port: int) -> str:
    return str(ask(port, "mail.example.test", "A").rr[0].rdata)


def edit(config: Path, old: str, new: str) -> None:
    path = config / "example.test.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_reload_swaps_a_good_config_and_keeps_the_old_on_errors(config_copy: Path) -> None:
    srv = ServerThread(config_copy).start()
    try:
        assert mail_address(srv.port) == "192.0.2.25"
        edit(config_copy, "mail: {A: 192.0.2.25", "mail: {A: 192.0.2.26")
        assert srv.reload() is True
        assert mail_address(srv.port) == "192.0.2.26"
        assert srv.server.holder.current.generation == 2

        edit(config_copy, "mail: {A: 192.0.2.26", "mail: {A: 192.0.2.999")  # broken
        (config_copy / "zz-broken.yaml").write_text("pools: [not, a, mapping]\n")
        assert srv.reload() is False
        assert mail_address(srv.port) == "192.0.2.26"  # old data still served
        assert srv.server.holder.current.generation == 2
        assert (
            srv.server.metrics.registry.get_sample_value("dnsd_reloads_total", {"result": "failed"})
            == 1
        )
    finally:
        srv.stop()


def test_sighup_reloads_a_running_server(config_copy: Path) -> None:
    with DnsdProcess(config_copy) as dnsd:
        assert mail_address(dnsd.port) == "192.0.2.25"
        edit(config_copy, "mail: {A: 192.0.2.25", "mail: {A: 192.0.2.27")
        dnsd.signal(signal.SIGHUP)
        dnsd.wait_for_log("generation 2")
        assert mail_address(dnsd.port) == "192.0.2.27"

        edit(config_copy, "ttl: 3600", "ttl: -1")
        dnsd.signal(signal.SIGHUP)
        dnsd.wait_for_log("reload failed")
        dnsd.wait_for_log(f"{config_copy / 'example.test.yaml'}:2: ttl: must be between")
        assert mail_address(dnsd.port) == "192.0.2.27"
        assert dnsd.stop() == 0


def test_serve_refuses_to_start_on_a_broken_config(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "z.yaml").write_text("zone: t.test\n")
    proc = subprocess.run(
        [sys.executable, "-m", "dnsd", "serve", str(tmp_path), "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert proc.returncode == 1
    assert 'z.yaml:1: soa: missing required key "soa"' in proc.stderr
