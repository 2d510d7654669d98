"""Loading a configuration directory into a served snapshot: read, validate, compile,
prepare the transfers and attach the DNSSEC keys — all of it off the event loop (a start,
a reload, `dnsd check`, `dnsd explain`, `dnsd geoip lookup`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from dnsd import lb_classes, zone_tables
from dnsd.config.loader import LoadCancelled, ParseCache, load_config
from dnsd.config.model import Zone
from dnsd.dnssec.apex import with_keys
from dnsd.errors import ConfigError, Reason
from dnsd.geo.database import GeoDatabase
from dnsd.process_tools import loading, release_free_memory
from dnsd.snapshot import NodeSettings, Snapshot, compile_snapshot
from dnsd.xfr.content import prepare_transfers
from dnsd.zone_keys import ZoneKeys


def load_snapshot(
    config_dir: Path,
    generation: int,
    geo: GeoDatabase | None = None,
    node: NodeSettings | None = None,
    key_dir: Path | None = None,
    create_keys: bool = False,
    previous: Snapshot | None = None,
    cache: ParseCache | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Snapshot:
    """Read, validate and compile; raises ConfigError. Safe to run in a worker thread, and
    meant to: it also converts each zone's records for transfers (seconds for a zone of
    100,000 records), so the event loop never does. With `cache` and `previous` (a reload)
    only files whose content changed are parsed again, and zones from unchanged files
    keep their compiled tree and their transfer conversion. `cancelled`: LoadCancelled
    once it returns True (looked at while reading and between the steps)."""
    with loading():
        return _load_snapshot(
            config_dir, generation, geo, node, key_dir, create_keys, previous, cache, cancelled
        )


def _load_snapshot(
    config_dir: Path,
    generation: int,
    geo: GeoDatabase | None,
    node: NodeSettings | None,
    key_dir: Path | None,
    create_keys: bool,
    previous: Snapshot | None,
    cache: ParseCache | None,
    cancelled: Callable[[], bool] | None,
) -> Snapshot:
    config, warnings = load_config(config_dir, cache=cache, cancelled=cancelled)
    if cancelled is not None and cancelled():
        raise LoadCancelled
    snapshot = compile_snapshot(
        config,
        generation,
        warnings,
        str(config_dir),
        time.time(),
        geo=geo,
        node=node,
        previous=previous,
    )
    if cancelled is not None and cancelled():
        raise LoadCancelled
    prepare_transfers(snapshot)
    if key_dir is not None:
        snapshot = with_keys(snapshot, zone_keys(config.zones, key_dir, create_keys))
    zone_tables.ready(snapshot, background=False)  # served from its first query
    lb_classes.prepare(snapshot)  # the same: a load-balanced name's first answer too
    release_free_memory()
    return snapshot


def zone_keys(zones: tuple[Zone, ...], key_dir: Path, create: bool) -> dict[str, ZoneKeys]:
    """The DNSSEC keys of every zone with `dnssec:` (made at the first start when missing;
    a `--workers` process only reads them). A key that cannot be read fails the load."""
    found: dict[str, ZoneKeys] = {}
    reasons: list[Reason] = []
    signed = [zone for zone in zones if zone.dnssec_algorithm is not None]
    if not signed:
        return found
    # The key files' crypto (~8 MiB) loads with the first signed zone, not in every server.
    from dnsd.dnssec.keys import ensure_keys

    for zone in signed:
        assert zone.dnssec_algorithm is not None
        try:
            found[zone.name] = ensure_keys(
                key_dir, zone.name, zone.dnssec_algorithm, create, zone.dnssec_split_keys
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            reasons.append(Reason(zone.file, 0, "dnssec", f"cannot load the zone's keys: {exc}"))
    if reasons:
        raise ConfigError(reasons)
    return found


def key_files(key_dir: Path, signing: Mapping[str, ZoneKeys]) -> dict[Path, float]:
    """The key files of the signed zones and their modification times."""
    from dnsd.dnssec.keys import key_dir as key_dir_of

    found = {}
    for zone in signing:
        for path in key_dir_of(key_dir, zone).glob("K*.json"):
            with contextlib.suppress(OSError):
                found[path] = path.stat().st_mtime
    return found
