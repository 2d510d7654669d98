"""The DNSSEC key directory followed: key states change with time (a roll), key files with
`dnsd keys roll`; every second the keys as they stand then are served. Every process does
this on its own; the states are a function of the time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from dnsd.dnssec.apex import with_keys
from dnsd.errors import ConfigError
from dnsd.loading import key_files, zone_keys
from dnsd.snapshot import SnapshotHolder

log = logging.getLogger("dnsd.server")  # one logger for every part of serving
KEY_CHECK_S = 1.0


async def follow_keys(
    key_dir: Path, holder: SnapshotHolder, new_version: Callable[[], None] | None
) -> None:
    """Look for changed key files or a key state due every second; serve the keys then.
    `new_version` (the main process, which keeps the zone versions): a new signed version
    after a new day (fresh RRSIGs) or new DNSKEY states."""
    seen: dict[Path, float] = {}
    while True:
        await asyncio.sleep(KEY_CHECK_S)
        snap = holder.current
        if not snap.signing:
            continue
        if new_version is not None:  # a new day is a new signed version (fresh RRSIGs)
            new_version()
        files = key_files(key_dir, snap.signing)
        now = time.time()
        due = any((k.next_change() or now + 1) <= now for k in snap.signing.values())
        if files == seen and not due:
            continue
        seen = files
        try:
            keys = await asyncio.to_thread(zone_keys, snap.config.zones, key_dir, False)
        except ConfigError as exc:
            log.error("DNSSEC keys: %s (still signing with the keys loaded before)", exc)
            continue
        current = holder.current
        if current.config is snap.config:  # no reload came in between
            holder.swap(with_keys(current, keys))
            if new_version is not None:  # new DNSKEY states: a new signed version
                new_version()
            for zone, zk in keys.items():
                states = ", ".join(f"{k.role} {k.tag} {k.state(zk.at)}" for k in zk.keys)
                log.info("DNSSEC keys of %s: %s", zone, states)
