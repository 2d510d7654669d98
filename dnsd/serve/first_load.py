"""The config as `dnsd serve` loads it at start: the GeoIP database opened (its age checked
in the main process), then the config directory loaded off the event loop; every problem
logged."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from dnsd.config.loader import ParseCache
from dnsd.errors import ConfigError
from dnsd.geo.age import log_database as log_geoip_database
from dnsd.geo.database import GeoDatabase
from dnsd.loading import load_snapshot
from dnsd.snapshot import NodeSettings, Snapshot

log = logging.getLogger("dnsd.server")  # one logger for every part of serving


async def load_first(
    config_dir: Path,
    geoip: Path | None,
    node: NodeSettings,
    key_dir: Path | None,
    create_keys: bool,
    main: bool,
    cache: ParseCache,
) -> Snapshot | None:
    """Generation 1, or None when the GeoIP database or the config cannot be loaded.
    `cache` keeps what was parsed: the reloads parse only the files changed since."""
    try:
        geo = GeoDatabase(geoip)
    except (OSError, ValueError) as exc:
        log.error("cannot open GeoIP database %s: %s", geoip or "(embedded)", exc)
        return None
    if main:  # the main process speaks for its workers
        log_geoip_database(geo, time.time(), log)  # a WARNING when it is stale
    try:
        snapshot = await asyncio.to_thread(
            load_snapshot, config_dir, 1, geo, node, key_dir, create_keys, None, cache
        )
    except ConfigError as exc:
        for reason in exc.reasons:
            log.error("%s", reason)
        return None
    for warning in snapshot.warnings:
        log.warning("%s", warning)
    return snapshot
