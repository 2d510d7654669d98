"""How old the GeoIP database is: networks move between countries and owners, so a
database much older than a couple of months places some clients wrongly. Warned about at
start and shown in the status document."""

from __future__ import annotations

import logging
import time
from typing import Any

from dnsd.geo.database import GeoDatabase

STALE_AFTER_DAYS = 60
NEWER = (
    "give a newer one with --geoip FILE (or `geoip:` in the server file): a GeoLite2-City "
    "or DB-IP City/Country .mmdb, reloaded by SIGHUP when the file changes"
)


def age_days(db: GeoDatabase, now: float) -> float:
    return max(0.0, (now - db.build_epoch) / 86400)


def build_date(db: GeoDatabase) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(db.build_epoch))


def geoip_status(db: GeoDatabase | None, now: float) -> dict[str, Any] | None:
    """The status document's `geoip`: which database, built when, and whether it is stale."""
    if db is None:
        return None
    days = age_days(db, now)
    return {
        "path": str(db.path),
        "type": db.database_type,
        "build_date": build_date(db),
        "build_epoch": db.build_epoch,
        "age_days": int(days),
        "stale": days > STALE_AFTER_DAYS,
    }


def log_database(db: GeoDatabase, now: float, log: logging.Logger) -> None:
    """One line at start: INFO when the database is recent, WARNING when it is stale."""
    days = age_days(db, now)
    if days > STALE_AFTER_DAYS:
        log.warning(
            "GeoIP database %s (%s) was built %s, %d days ago (more than %d): clients on "
            "networks that moved since are placed wrongly; %s",
            db.path,
            db.database_type,
            build_date(db),
            days,
            STALE_AFTER_DAYS,
            NEWER,
        )
    else:
        log.info("GeoIP database %s (%s, built %s)", db.path, db.database_type, build_date(db))
