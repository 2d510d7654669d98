"""Operator overrides (docs/health.md, overrides): validated, kept as one document, persisted.

Backends `down`/`up`/`drain`, pools `down`/`up`, load balancers' trickle ratio. The
document is what the state file holds and what nodes share through Redis; the state file
is written atomically (temp file, fsync, rename, fsync the directory), so a crash leaves
the old or the new file, never half of one.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, get_args

from dnsd.atomic_files import discard_leftovers, write_file
from dnsd.config.model import Config
from dnsd.events import current_actor
from dnsd.events.record import SYSTEM, Event, iso_z, make
from dnsd.health.view import BackendOverride, PoolOverride

log = logging.getLogger("dnsd.health")

OVERRIDES_FILE = "overrides.json"
MAX_STATE_BYTES = 16 << 20
BACKEND_STATES: tuple[str, ...] = get_args(BackendOverride)
POOL_STATES: tuple[str, ...] = get_args(PoolOverride)


class OverrideError(ValueError):
    """An override names something that does not exist or a value out of range."""


class PersistError(OSError):
    """The state file could not be written: the override was not applied."""


MAX_REASON = 200  # characters of an override's reason
Version = tuple[float, str]  # (time, node): the later wins, the node name breaks ties
NEVER: Version = (float("-inf"), "")  # an entry a side has never heard of


def entry_key(table: str, key: str | tuple[str, str]) -> str:
    """ "backends/POOL/BACKEND", "pools/POOL", "load_balancers/LB" (the document's names)."""
    name = "load_balancers" if table == "trickle" else table
    return f"{name}/{'/'.join(key) if isinstance(key, tuple) else key}"


@dataclass(frozen=True, slots=True)
class OverrideMeta:
    """Who set an override (the admin token's name), why, when, and when it ends by itself
    (None: it stays until removed)."""

    actor: str = ""
    reason: str = ""
    since: float = 0.0
    expires: float | None = None

    def document(self) -> dict[str, Any]:
        return {
            "actor": self.actor,
            "reason": self.reason,
            "since": self.since,
            "expires": self.expires,
        }

    @classmethod
    def from_document(cls, data: Any) -> OverrideMeta:
        if not isinstance(data, dict):
            raise ValueError("bad override metadata")
        expires = data.get("expires")
        meta = cls(
            actor=str(data.get("actor", ""))[:100],
            reason=str(data.get("reason", ""))[:MAX_REASON],
            since=float(data.get("since", 0.0)),
            expires=None if expires is None else float(expires),
        )
        if not math.isfinite(meta.since) or not (
            meta.expires is None or math.isfinite(meta.expires)
        ):
            raise ValueError("bad override time")
        return meta


@dataclass(slots=True)
class Overrides:
    """The overrides, and per entry the version that set or removed it: nodes merge their
    documents entry by entry (last writer wins), so two operators changing different
    entries on two nodes both keep their change, and a DELETE — a removal with a newer
    version — always supersedes what came before it."""

    backends: dict[tuple[str, str], BackendOverride] = field(default_factory=dict)
    pools: dict[str, PoolOverride] = field(default_factory=dict)
    trickle: dict[str, float] = field(default_factory=dict)
    updated_at: float = 0.0
    versions: dict[str, Version] = field(default_factory=dict)  # removed entries keep theirs
    # Per active entry (entry_key): who set it, why, since and until when. The expiry is
    # persisted with the entry, so a node that restarts still removes it on time.
    meta: dict[str, OverrideMeta] = field(default_factory=dict)

    # -- validated changes: KeyError for unknown names, OverrideError for bad values ---------
    @staticmethod
    def check_backend(config: Config, pool: str, backend: str, state: str | None) -> None:
        p = config.pools.get(pool)
        if p is None or all(b.name != backend for b in p.backends):
            raise KeyError(f"no backend {backend!r} in pool {pool!r}")
        if state is not None and state not in BACKEND_STATES:
            raise OverrideError(f"state must be one of {', '.join(BACKEND_STATES)}")

    @staticmethod
    def check_pool(config: Config, pool: str, state: str | None) -> None:
        if pool not in config.pools:
            raise KeyError(f"no pool {pool!r}")
        if state is not None and state not in POOL_STATES:
            raise OverrideError(f"state must be one of {', '.join(POOL_STATES)}")

    @staticmethod
    def check_trickle(config: Config, lb: str, ratio: float | None) -> None:
        if lb not in config.load_balancers:
            raise KeyError(f"no load balancer {lb!r}")
        if ratio is not None and (isinstance(ratio, bool) or not 0.0 <= ratio <= 1.0):
            raise OverrideError("trickle_ratio must be a number from 0.0 to 1.0")

    # -- the document ------------------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        return {
            "backends": {f"{p}/{b}": s for (p, b), s in sorted(self.backends.items())},
            "pools": dict(sorted(self.pools.items())),
            "load_balancers": {k: {"trickle_ratio": v} for k, v in sorted(self.trickle.items())},
            "updated_at": self.updated_at,
            "versions": {k: [at, node] for k, (at, node) in sorted(self.versions.items())},
        } | ({"meta": {k: m.document() for k, m in sorted(self.meta.items())}} if self.meta else {})

    def expired(self, now: float) -> list[tuple[str, Any]]:
        """(table, key) of every entry whose expiry has passed."""
        return [
            (table, key)
            for name, (table, key, _) in self._entries().items()
            if (m := self.meta.get(name)) is not None and m.expires is not None and m.expires <= now
        ]

    def _entries(self) -> dict[str, tuple[str, Any, Any]]:
        out: dict[str, tuple[str, Any, Any]] = {}
        for table in ("backends", "pools", "trickle"):
            for key, value in getattr(self, table).items():
                out[entry_key(table, key)] = (table, key, value)
        return out

    def merged(self, other: Overrides) -> Overrides:
        """Entry by entry, the newer version wins (set or removed)."""
        mine, theirs = self._entries(), other._entries()
        out = Overrides(updated_at=max(self.updated_at, other.updated_at))
        for name in set(self.versions) | set(other.versions) | set(mine) | set(theirs):
            ours = self.versions.get(name, (self.updated_at, "") if name in mine else NEVER)
            their = other.versions.get(name, (other.updated_at, "") if name in theirs else NEVER)
            version, entries = (their, theirs) if their > ours else (ours, mine)
            out.versions[name] = version
            if name in entries:
                table, key, value = entries[name]
                getattr(out, table)[key] = value
                meta = (other if entries is theirs else self).meta.get(name)
                if meta is not None:  # the expiry travels with the entry that won
                    out.meta[name] = meta
        return out

    @classmethod
    def from_document(cls, data: Any, default_time: float = 0.0) -> Overrides:
        """The document (state file, Redis) → overrides; ValueError when malformed."""
        if not isinstance(data, dict):
            raise ValueError("not an object")
        backends = {tuple(k.split("/", 1)): v for k, v in data.get("backends", {}).items()}
        pools = dict(data.get("pools", {}))
        trickle = {k: float(v["trickle_ratio"]) for k, v in data.get("load_balancers", {}).items()}
        if not all(len(k) == 2 and v in BACKEND_STATES for k, v in backends.items()):
            raise ValueError("bad backend override")
        if not all(v in POOL_STATES for v in pools.values()):
            raise ValueError("bad pool override")
        if not all(0.0 <= v <= 1.0 for v in trickle.values()):
            raise ValueError("bad trickle override")
        versions = {
            str(k): (float(v[0]), str(v[1])) for k, v in dict(data.get("versions", {})).items()
        }
        if not all(len(k) < 600 and math.isfinite(v[0]) for k, v in versions.items()):
            raise ValueError("bad override version")
        meta = {
            str(k): OverrideMeta.from_document(v) for k, v in dict(data.get("meta", {})).items()
        }
        return cls(
            backends=cast(dict[tuple[str, str], BackendOverride], backends),
            pools=pools,
            trickle=trickle,
            updated_at=float(data.get("updated_at", default_time)),
            versions=versions,
            meta=meta,
        )

    def copy(self) -> Overrides:
        return Overrides(
            dict(self.backends),
            dict(self.pools),
            dict(self.trickle),
            self.updated_at,
            dict(self.versions),
            dict(self.meta),
        )

    def __len__(self) -> int:
        return len(self.backends) + len(self.pools) + len(self.trickle)

    # -- the state file ----------------------------------------------------------------------
    def save(self, state_dir: Path) -> None:
        write_file(state_dir / OVERRIDES_FILE, json.dumps(self.document(), indent=2) + "\n")

    @classmethod
    def load(cls, state_dir: Path, now: float) -> Overrides:
        """The persisted overrides; an unreadable file is moved aside (and logged), never
        fatal: the server starts without overrides rather than not at all."""
        path = state_dir / OVERRIDES_FILE
        discard_leftovers(path)  # from a crash mid-write
        if not path.exists():
            return cls()
        try:
            if path.stat().st_size > MAX_STATE_BYTES:
                raise ValueError(f"larger than {MAX_STATE_BYTES >> 20} MiB")
            loaded = cls.from_document(json.loads(path.read_text()))
        except (ValueError, TypeError, KeyError, AttributeError, OSError, RecursionError) as exc:
            aside = path.with_name(f"{path.name}.corrupt-{int(now)}")
            path.replace(aside)
            log.error(
                "state file %s is unreadable (%s): moved to %s, starting without overrides",
                path,
                type(exc).__name__ if isinstance(exc, RecursionError) else str(exc)[:200],
                aside,
            )
            return cls()
        if loaded:
            log.info("loaded %d override(s) from %s", len(loaded), path)
        return loaded


def override_event(
    table: str, key: Any, old: Any, value: Any, meta: OverrideMeta | None, cause: str, at: float
) -> Event:
    """The `override` event of one change: its cause (`override`, `override removed`,
    `override expired`, `trickle 1.0`, `trickle removed`) and who made it."""
    actor = meta.actor if meta is not None and meta.actor else current_actor()
    if cause == "expired":
        why, actor = "override expired", SYSTEM
    elif table == "trickle":
        why = "trickle removed" if value is None else f"trickle {float(value)}"
    else:
        why = "override removed" if value is None else "override"
    where: dict[str, Any]
    if table == "backends":
        where = {"pool": key[0], "backend": key[1]}
    elif table == "pools":
        where = {"pool": key}
    else:
        where = {"lb": key}
    details: dict[str, Any] = {"old": old, "new": value}
    if meta is not None and meta.reason:
        details["reason"] = meta.reason
    if meta is not None and meta.expires:
        details["expires"] = iso_z(meta.expires)
    return make(at, "override", why, actor, **where, **details)
