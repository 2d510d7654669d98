"""The event record every consumer shares — the status page, `GET /api/v1/events`,
webhooks, the log and `events.jsonl`: when (`time`, UTC), what (`kind`), about what
(`lb`, `pool`, `backend`, `regions`), why (`cause`: the probe error and its source,
`override`, `trickle 1.0`, `reload`, …) and who (`actor`: a token's name, `probe` or
`system`). Kind-specific details (`old`, `new`, `changes`, `errors`, …) ride along in
`details` and are flattened into the JSON."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final

KINDS: Final = (
    "probe",  # one probe source's state changed (not sent to webhooks)
    "backend_health",  # a backend's verdict changed
    "quorum",  # a backend lost its quorum of fresh sources, or has it back (docs/health.md)
    "pool_health",
    "failover",  # regions of a load balancer left for a pool that is not their first choice
    "failback",  # regions returned to their first-choice pool
    "fail_open",
    "ramp",  # client regions of a load balancer start a ramp (docs/steering.md, ramps)
    "override",
    "config",  # a reload or a config API change
    "reload_failed",
    "redis",
    "config_sync",  # this node's config left the cluster's shared history, or is back in it
)
CORE: Final = ("time", "kind", "lb", "pool", "backend", "regions", "cause", "actor")
SYSTEM: Final = "system"
PROBE: Final = "probe"

# Who is acting in this task, and why: an admin handler sets the token's name around the
# change it makes (override, reload, config API); anything else is the server itself.
_ACTOR: ContextVar[str] = ContextVar("dnsd_actor", default=SYSTEM)
_CAUSE: ContextVar[str | None] = ContextVar("dnsd_cause", default=None)


def current_actor() -> str:
    return _ACTOR.get()


def current_cause(default: str) -> str:
    return _CAUSE.get() or default


@contextlib.contextmanager
def acting_as(actor: str, cause: str | None = None) -> Iterator[None]:
    """Events made inside this block name `actor` (and `cause`, where the change itself
    does not say, as a reload does not); reset after: a keep-alive connection runs its
    next request in the same task."""
    tokens = _ACTOR.set(actor), _CAUSE.set(cause)
    try:
        yield
    finally:
        _ACTOR.reset(tokens[0])
        _CAUSE.reset(tokens[1])


@dataclass(frozen=True, slots=True)
class Event:
    time: float  # epoch seconds
    kind: str
    cause: str
    actor: str
    lb: str | None = None
    pool: str | None = None
    backend: str | None = None
    regions: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def subject(self) -> str:
        """What it is about, for people: `backend eu/eu-1`, `pool eu`, `load balancer web`."""
        if self.backend is not None:
            return f"backend {self.pool}/{self.backend}"
        if self.lb is not None:
            return f"load balancer {self.lb}"
        if self.pool is not None:
            return f"pool {self.pool}"
        return str(self.details.get("subject", ""))

    def to_json(self) -> dict[str, Any]:
        core = {
            "time": iso_z(self.time),
            "kind": self.kind,
            "lb": self.lb,
            "pool": self.pool,
            "backend": self.backend,
            "regions": list(self.regions),
            "cause": self.cause,
            "actor": self.actor,
        }
        return {**self.details, **core}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        """The inverse of `to_json` (a line of events.jsonl); ValueError/KeyError/TypeError
        for a line that is not one."""
        regions = data.get("regions") or ()
        if not isinstance(regions, list | tuple) or not all(isinstance(r, str) for r in regions):
            raise TypeError("regions")
        for name in ("lb", "pool", "backend"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise TypeError(name)
        kind, cause, actor = data["kind"], data["cause"], data["actor"]
        if not all(isinstance(v, str) for v in (kind, cause, actor)):
            raise TypeError("kind, cause, actor")
        return cls(
            time=parse_iso(data["time"]),
            kind=kind,
            cause=cause,
            actor=actor,
            lb=data.get("lb"),
            pool=data.get("pool"),
            backend=data.get("backend"),
            regions=tuple(regions),
            details=MappingProxyType({k: v for k, v in data.items() if k not in CORE}),
        )


def make(
    at: float,
    kind: str,
    cause: str,
    actor: str,
    *,
    lb: str | None = None,
    pool: str | None = None,
    backend: str | None = None,
    regions: tuple[str, ...] = (),
    **details: Any,
) -> Event:
    """An Event with its details given as keywords."""
    return Event(at, kind, cause, actor, lb, pool, backend, regions, MappingProxyType(details))


def iso_z(at: float) -> str:
    """`2026-12-01T19:40:00.123Z`: UTC, milliseconds, `Z`."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: Any) -> float:
    """ISO 8601 → epoch seconds; a time without a zone is UTC. ValueError otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("not an ISO 8601 time")
    text = value.strip()
    if text[-1] in "zZ":
        text = text[:-1] + "+00:00"
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
