"""Reload: a good config is swapped in atomically; a broken one keeps the old one serving."""

from __future__ import annotations

import signal
import time
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


def big_zone(records: int) -> str:
    lines = ["zone: big.test", "soa: {mname: ns1.big.test., rname: h.big.test.}", "records:"]
    lines += [f"  h{i}: {{A: 192.0.2.{i % 250 + 1}}}" for i in range(records)]
    return "\n".join(lines) + "\n"


def test_overlapping_reloads_finish_in_order(config_copy: Path) -> None:
    """A slow reload that read a zone, then a fast one after the zone was deleted: the
    deleted zone must not come back. Reloads run one at a time."""
    import asyncio

    from dnslib import RCODE

    (config_copy / "big.test.yaml").write_text(big_zone(20_000))
    srv = ServerThread(config_copy).start()
    try:
        assert ask(srv.port, "h1.big.test").header.rcode == RCODE.NOERROR
        first = asyncio.run_coroutine_threadsafe(srv.server.reload(), srv.loop)
        time.sleep(0.05)  # the first reload is reading big.test.yaml
        (config_copy / "big.test.yaml").unlink()
        second = asyncio.run_coroutine_threadsafe(srv.server.reload(), srv.loop)
        third = asyncio.run_coroutine_threadsafe(srv.server.reload(), srv.loop)  # coalesced
        r1, r2, r3 = (f.result(timeout=30) for f in (first, second, third))
        assert r1.ok and r2.ok and r2 == r3
        assert r1.generation < r2.generation == srv.server.holder.current.generation
        assert ask(srv.port, "h1.big.test").header.rcode == RCODE.REFUSED  # gone for good
    finally:
        srv.stop()


def test_a_broken_loader_input_is_an_ordinary_failed_reload(config_copy: Path) -> None:
    """Alias bombs, deep nesting, huge integers, FIFOs and symlinks out of the directory
    fail the reload with a reason; the old config keeps serving."""
    import os

    outside = config_copy.parent / "secret.yaml"
    outside.write_text("password: hunter2\n")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    cases = {
        "bomb.yaml": bomb + "? *i\n: 1\n",
        "deep.yaml": "pools: " + "[" * 5000 + "]" * 5000 + "\n",
        "int.yaml": "pools: {p: {weight: " + "9" * 5000 + "}}\n",
    }
    srv = ServerThread(config_copy).start()
    try:
        for name, text in cases.items():
            (config_copy / name).write_text(text)
            started = time.monotonic()
            assert srv.reload() is False, name
            assert time.monotonic() - started < 2.0, name
            assert mail_address(srv.port) == "192.0.2.25"
            (config_copy / name).unlink()
        os.mkfifo(config_copy / "fifo.yaml")
        assert srv.reload() is False  # not opened: a FIFO would block the reload
        (config_copy / "fifo.yaml").unlink()
        (config_copy / "link.yaml").symlink_to(outside)
        assert srv.reload() is False
        assert srv.reload() is False
        (config_copy / "link.yaml").unlink()
        assert srv.reload() is True
        failed = srv.server.metrics.registry.get_sample_value(
            "dnsd_reloads_total", {"result": "failed"}
        )
        assert failed == 6
    finally:
        srv.stop()
