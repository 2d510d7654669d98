"""One entry of the configuration directory, as the config API names it.

Routes (under /api/v1/config/): `pools/P`, `pools/P/backends/B`, `monitors/M`,
`load_balancers/L`, `zones/Z` (a zone's own settings: `ttl`, `soa`, ...; a PUT of a new
zone creates its YAML file), `zones/Z/records/NAME`. A change is a target with the new body (the
YAML entry as JSON) or None for a delete, optionally guarded by an ETag.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from dnsd.config.pool_refs import names_lb

Kind = Literal["pool", "backend", "monitor", "load_balancer", "zone", "record"]
SECTIONS: dict[str, str] = {
    "pool": "pools",
    "monitor": "monitors",
    "load_balancer": "load_balancers",
}
MAX_NAME = 253


class BadTarget(ValueError):
    """A route that names no config entry."""


@dataclass(frozen=True, slots=True)
class Target:
    kind: Kind
    names: tuple[str, ...]  # (pool,) (pool, backend) (monitor,) (lb,) (zone,) (zone, record name)

    @property
    def route(self) -> str:
        if self.kind == "backend":
            return f"pools/{self.names[0]}/backends/{self.names[1]}"
        if self.kind == "record":
            return f"zones/{self.names[0]}/records/{self.names[1]}"
        if self.kind == "zone":
            return f"zones/{self.names[0]}"
        return f"{SECTIONS[self.kind]}/{self.names[0]}"

    @property
    def name(self) -> str:
        return self.names[-1]


@dataclass(frozen=True, slots=True)
class Change:
    target: Target
    body: Any  # the entry as JSON; None deletes it
    if_match: str | None = None  # an ETag, "*" (must exist) or None (unconditional)
    missing_ok: bool = False  # deleting what is not there is done, not 404 (the Redis sync)


def parse_route(route: str) -> Target:
    """`pools/web` → Target("pool", ("web",)); BadTarget for anything else."""
    parts = route.strip("/").split("/")
    if len(parts) == 2 and parts[0] in ("pools", "monitors", "load_balancers"):
        kind: Kind = {"pools": "pool", "monitors": "monitor", "load_balancers": "load_balancer"}[
            parts[0]
        ]  # type: ignore[assignment]
        target = Target(kind, (parts[1],))
    elif len(parts) == 4 and parts[0] == "pools" and parts[2] == "backends":
        target = Target("backend", (parts[1], parts[3]))
    elif len(parts) == 2 and parts[0] == "zones":
        target = Target("zone", (parts[1].lower().rstrip(".") or ".",))
    elif len(parts) == 4 and parts[0] == "zones" and parts[2] == "records":
        target = Target("record", (parts[1].lower().rstrip(".") or ".", parts[3]))
    else:
        raise BadTarget(
            f"{route[:100]!r} is not a config route (pools/P, pools/P/backends/B, "
            "monitors/M, load_balancers/L, zones/Z, zones/Z/records/NAME)"
        )
    for name in target.names:
        if not name or len(name) > MAX_NAME or not name.isprintable():
            raise BadTarget(f"{name[:40]!r}: a name is 1 to {MAX_NAME} printable characters")
    if target.kind not in ("record", "zone") and names_lb(target.names[-1]):
        raise BadTarget("names must not start with 'lb:'")
    return target


def etag(value: Any) -> str | None:
    """The ETag of an entry's content (None when it does not exist): a hash of its JSON
    with sorted keys, so the same content has the same tag on every node."""
    if value is None:
        return None
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return '"' + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'


def matches(if_match: str, current: str | None) -> bool:
    """RFC 9110 §13.1.1: `*` matches any existing entry, otherwise one of the listed tags
    (weak tags compared by their opaque part)."""
    if current is None:
        return False
    tags = [t.strip().removeprefix("W/") for t in if_match.split(",")]
    return "*" in tags or current in tags
