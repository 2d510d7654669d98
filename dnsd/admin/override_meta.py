"""An override's `reason`, `expires` / `for` (parsed from a PUT body) and the list of the
active overrides `GET /api/v1/overrides` shows (docs/api.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dnsd.admin.gate import BadRequest
from dnsd.config.checker import parse_duration
from dnsd.health.overrides import MAX_REASON, OverrideMeta, Overrides, entry_key

META_FIELDS = frozenset({"reason", "expires", "for"})
MAX_FOR_S = 366 * 86400.0  # an expiry further than a year away is a typo


def override_meta(body: dict[str, Any], actor: str, now: float) -> OverrideMeta:
    """BadRequest (nothing changes) for a reason too long, an expiry in the past or both
    `expires` and `for`."""
    reason = body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise BadRequest(f"reason: text of at most {MAX_REASON} characters")
    if "expires" in body and "for" in body:
        raise BadRequest('give "expires" (a time) or "for" (a duration), not both')
    expires: float | None = None
    if body.get("for") is not None:
        seconds = parse_duration(body["for"])
        if seconds is None or not 0 < seconds <= MAX_FOR_S:
            raise BadRequest('for: a duration such as "30m" or "2h" (at most a year)')
        expires = now + seconds
    elif body.get("expires") is not None:
        expires = parse_time(body["expires"])
        if expires <= now:
            raise BadRequest("expires: that time has passed")
        if expires - now > MAX_FOR_S:
            raise BadRequest("expires: at most a year from now")
    return OverrideMeta(actor=actor, reason=reason, since=now, expires=expires)


def parse_time(value: Any) -> float:
    """ISO 8601 (`2026-12-01T18:00:00Z`, a time without a zone is UTC) → epoch seconds."""
    if not isinstance(value, str):
        raise BadRequest("expires: an ISO 8601 time, e.g. 2026-12-01T18:00:00Z")
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadRequest("expires: an ISO 8601 time, e.g. 2026-12-01T18:00:00Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def iso(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def active_overrides(overrides: Overrides) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    tables: list[tuple[str, str, dict[Any, Any]]] = [
        ("backends", "backend", overrides.backends),
        ("pools", "pool", overrides.pools),
        ("trickle", "load_balancer", overrides.trickle),
    ]
    for table, kind, entries in tables:
        for key, value in sorted(entries.items()):
            meta = overrides.meta.get(entry_key(table, key)) or OverrideMeta()
            out.append(
                {
                    "kind": kind,
                    "target": "/".join(key) if isinstance(key, tuple) else key,
                    "trickle_ratio" if table == "trickle" else "state": value,
                    "actor": meta.actor or None,
                    "reason": meta.reason,
                    "since": iso(meta.since or None),
                    "expires": iso(meta.expires),
                }
            )
    return out
