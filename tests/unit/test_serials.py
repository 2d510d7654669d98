"""SOA serials: RFC 1982 arithmetic, the auto and floor rules, and versions kept
across restarts in the state directory."""

from __future__ import annotations

import shutil
from pathlib import Path

from dnsd.health.view import HealthView
from dnsd.loading import load_snapshot
from dnsd.xfr.serials import next_serial, serial_gt
from dnsd.xfr.versions import ZoneVersions

ROOT = Path(__file__).parent.parent.parent
NOW = 1_800_000_000.0


def test_rfc1982_comparison_wraps() -> None:
    assert serial_gt(2, 1) and not serial_gt(1, 2)
    assert serial_gt(0, 0xFFFFFFFF)  # wrapped: 0 follows 2^32 - 1
    assert not serial_gt(5, 5)
    assert not serial_gt(0, 1 << 31) and not serial_gt(1 << 31, 0)  # undefined pair


def test_auto_starts_at_the_clock_and_rises_with_changes_only() -> None:
    assert next_serial(None, False, None, NOW) == int(NOW)
    assert next_serial(int(NOW), False, None, NOW + 50) == int(NOW)  # nothing changed
    assert next_serial(int(NOW), True, None, NOW) == int(NOW) + 1  # two changes in a second
    assert next_serial(int(NOW) + 1, True, None, NOW + 100) == int(NOW) + 100  # the clock
    assert next_serial(0xFFFFFFFF, True, None, 0) == 0  # wraps, still greater (RFC 1982)


def test_an_explicit_serial_is_a_floor() -> None:
    assert next_serial(None, False, 7, NOW) == 7
    assert next_serial(7, True, 7, NOW) == 8  # a health change raises it above the floor
    assert next_serial(8, False, 7, NOW) == 8  # the floor never lowers the served serial
    assert next_serial(8, True, 100, NOW) == 100  # a config change that raises it takes it
    assert next_serial(8, False, 100, NOW) == 100  # even when the content did not change


def copy_zones(tmp: Path) -> Path:
    config = tmp / "zones"
    shutil.copytree(ROOT / "zones", config)
    path = config / "example.test.yaml"
    path.write_text(path.read_text().replace("  serial: 2026113001\n", ""))  # auto
    return config


def test_versions_survive_a_restart_and_number_changes(tmp_path: Path) -> None:
    config, state = copy_zones(tmp_path), tmp_path / "state"
    view = HealthView()
    first = ZoneVersions(state).update(load_snapshot(config, 1), view, NOW)
    serial = first.zones["example.test."].soa.rdata.times[0]
    assert serial == int(NOW)
    # A restart with the same content: the same serial, whatever the clock says.
    again = ZoneVersions(state).update(load_snapshot(config, 1), view, NOW + 500)
    assert again.zones["example.test."].soa.rdata.times[0] == serial
    # A restart after a change: the clock (larger than serial + 1).
    path = config / "example.test.yaml"
    path.write_text(path.read_text().replace("records:\n", "records:\n  n: {A: 192.0.2.9}\n", 1))
    versions = ZoneVersions(state)
    changed = versions.update(load_snapshot(config, 2), view, NOW + 600)
    assert changed.zones["example.test."].soa.rdata.times[0] == int(NOW) + 600
    assert versions.current("example.test.") is not None
    assert versions.version("example.test.", int(NOW) + 600) is not None
    # The explicit serial of example.net (a floor) is served as written.
    assert changed.zones["example.net."].soa.rdata.times[0] == 2026113001
    # `dnsd export` reads the state but never writes it.
    before = (state / "serials.json").read_text()
    ZoneVersions(state, persist=False).update(load_snapshot(config, 3), view, NOW + 900)
    assert (state / "serials.json").read_text() == before


def test_a_broken_state_file_starts_afresh(tmp_path: Path) -> None:
    config, state = copy_zones(tmp_path), tmp_path / "state"
    state.mkdir()
    (state / "serials.json").write_text("{not json")
    snap = ZoneVersions(state).update(load_snapshot(config, 1), HealthView(), NOW)
    assert snap.zones["example.test."].soa.rdata.times[0] == int(NOW)
