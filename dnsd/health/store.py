"""HealthStore: the mutable health state, published as immutable HealthView values.

Probes write results here; each (probe target, source region) has its own state machine
and RTT EWMA. A backend is unhealthy when at least `quorum` of its monitor's sources say so
(default: a majority). Admin overrides are kept beside the probed state and persisted in
the state directory (atomic write: temp file, fsync, rename). A new view is published at
once on every health transition or override change; RTT-only changes are published at
most every `rtt_publish_interval_s`, so 500 backends probed every second stay cheap.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dnsd.config.model import Backend, Monitor, Pool
from dnsd.health import ewma
from dnsd.health.fsm import ProbeResult, SourceState, on_result
from dnsd.health.probes import ProbeTarget, target_of
from dnsd.health.view import BackendHealth, HealthView, RttSample
from dnsd.snapshot import NodeSettings, Snapshot

log = logging.getLogger("dnsd.health")

OVERRIDES_FILE = "overrides.json"
BACKEND_STATES = ("down", "up", "drain")
POOL_STATES = ("down", "up")


@dataclass(frozen=True, slots=True)
class HealthEvent:
    at: float
    kind: str  # "probe" (one source changed), "backend" (the verdict changed), "override"
    subject: str
    old: str
    new: str
    reason: str
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "kind": self.kind,
            "subject": self.subject,
            "source": self.source,
            "old": self.old,
            "new": self.new,
            "reason": self.reason,
        }


@dataclass(slots=True)
class SourceHealth:
    state: SourceState
    rtt: RttSample | None = None
    node: str | None = None  # another node's observation (shared through Redis)


@dataclass(frozen=True, slots=True)
class RemoteObservation:
    state: str
    rtt: RttSample | None
    published_at: float


class OverrideError(ValueError):
    """An override names something that does not exist or a value out of range."""


class HealthStore:
    def __init__(
        self,
        state_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
        rtt_publish_interval_s: float = 1.0,
        history: int = 500,
    ) -> None:
        self.state_dir = state_dir
        self._clock = clock
        self._rtt_interval = rtt_publish_interval_s
        self._sources: dict[tuple[ProbeTarget, str], SourceHealth] = {}
        self._snapshot: Snapshot | None = None
        self._verdicts: dict[tuple[str, str], str] = {}
        self._last_publish = 0.0
        self.backend_overrides: dict[tuple[str, str], str] = {}
        self.pool_overrides: dict[str, str] = {}
        self.trickle_overrides: dict[str, float] = {}
        self.events: deque[HealthEvent] = deque(maxlen=history)
        self.transitions_total = 0
        self.override_changes_total = 0
        self.listeners: list[Callable[[HealthEvent], None]] = []
        # Several nodes (dnsd.health.bus): observations from the others, and hooks to share ours.
        self.only_source: str | None = None  # probe only this source region (this node's)
        self.remote_max_age_s = 30.0
        self.remote_frozen = False  # True while the bus is down: keep the last shared state
        self._remote: dict[tuple[ProbeTarget, str], RemoteObservation] = {}
        self._fresh_remote: set[tuple[ProbeTarget, str]] = set()
        self.observation_listeners: list[Callable[[ProbeTarget, str, SourceHealth], None]] = []
        self.override_listeners: list[Callable[[dict[str, Any]], None]] = []
        self.overrides_updated_at = 0.0
        self.view = HealthView()
        # Worker processes (dnsd.workers) take their views from the main process instead of
        # computing them; view_listeners hear of every view the main process publishes.
        self.external_views = False
        self.view_listeners: list[Callable[[HealthView], None]] = []
        self._load_overrides()

    # -- what to probe -----------------------------------------------------------------------
    def monitor_for(self, pool: Pool, backend: Backend) -> Monitor | None:
        snap = self._snapshot
        name = backend.monitor or pool.monitor
        return snap.config.monitors.get(name) if snap and name else None

    def sources_of(self, monitor: Monitor) -> tuple[str, ...]:
        if monitor.sources:
            return monitor.sources
        node = self._snapshot.node if self._snapshot else NodeSettings()
        return (node.probe_source,)

    def probe_plan(self) -> dict[tuple[ProbeTarget, str], Monitor]:
        """Every (target, source) the current config needs probed, with its monitor."""
        plan: dict[tuple[ProbeTarget, str], Monitor] = {}
        for _pool, backend, monitor in self._monitored():
            target = target_of(backend, monitor)
            for source in self.sources_of(monitor):
                if self.only_source is None or source == self.only_source or not monitor.sources:
                    plan[(target, source)] = monitor
        return plan

    def _monitored(self) -> Iterator[tuple[Pool, Backend, Monitor]]:
        if self._snapshot is None:
            return
        for pool in self._snapshot.config.pools.values():
            for backend in pool.backends:
                monitor = self.monitor_for(pool, backend)
                if monitor is not None:
                    yield pool, backend, monitor

    def set_snapshot(self, snapshot: Snapshot) -> None:
        """A new config: keep the state of targets that remain, forget the others."""
        self._snapshot = snapshot
        wanted = set(self.probe_plan())
        for key in [k for k in self._sources if k not in wanted]:
            del self._sources[key]
        targets = {target for target, _ in wanted} | {
            target_of(b, m) for _, b, m in self._monitored()
        }
        for key in [k for k in self._remote if k[0] not in targets]:
            del self._remote[key]
        self.publish()

    # -- probe results -----------------------------------------------------------------------
    def record(
        self, target: ProbeTarget, source: str, result: ProbeResult, monitor: Monitor
    ) -> None:
        key = (target, source)
        entry = self._sources.get(key) or SourceHealth(SourceState())
        entry.state, transition = on_result(
            entry.state, result, monitor.healthy_threshold, monitor.unhealthy_threshold
        )
        if result.ok and result.rtt_ms is not None:
            entry.rtt = ewma.update(entry.rtt, result.rtt_ms, monitor.rtt_ewma_alpha, result.at)
        self._sources[key] = entry
        for listener in self.observation_listeners:
            listener(target, source, entry)
        if transition is not None:
            self.transitions_total += 1
            subject = f"{target.host}:{target.port}"
            self._event(
                HealthEvent(
                    transition.at,
                    "probe",
                    subject,
                    transition.old,
                    transition.new,
                    transition.reason,
                    source,
                )
            )
            self.publish()
        elif self._clock() - self._last_publish >= self._rtt_interval:
            self.publish()

    def source_states(self, pool: Pool, backend: Backend) -> dict[str, SourceHealth]:
        monitor = self.monitor_for(pool, backend)
        if monitor is None:
            return {}
        target = target_of(backend, monitor)
        out: dict[str, SourceHealth] = {}
        for source in self.sources_of(monitor):
            local = self._sources.get((target, source))
            remote = self._remote.get((target, source))
            if local is not None:
                out[source] = local
            elif remote is not None and (target, source) in self._fresh_remote:
                state = SourceState(state=remote.state, since=remote.published_at)  # type: ignore[arg-type]
                out[source] = SourceHealth(state, remote.rtt, node="remote")
            else:
                out[source] = SourceHealth(SourceState())
        return out

    # -- other nodes' observations -----------------------------------------------------------
    def apply_remote(
        self,
        target: ProbeTarget,
        source: str,
        state: str,
        ewma_ms: float | None,
        samples: int,
        last_at: float,
        published_at: float,
    ) -> None:
        key = (target, source)
        if key in self._sources and self.only_source is None:
            return  # probed here: our own observation wins
        previous = self._remote.get(key)
        rtt = RttSample(ewma_ms, samples, last_at) if ewma_ms is not None else None
        self._remote[key] = RemoteObservation(state, rtt, published_at)
        was_fresh = key in self._fresh_remote
        if self.remote_frozen or self._clock() - published_at <= self.remote_max_age_s:
            self._fresh_remote.add(key)
        if previous is None or previous.state != state or not was_fresh:
            if previous is not None and previous.state != state:
                subject = f"{target.host}:{target.port}"
                self._event(
                    HealthEvent(
                        published_at,
                        "probe",
                        subject,
                        previous.state,
                        state,
                        "observed by another node",
                        source,
                    )
                )
            self.publish()
        elif self._clock() - self._last_publish >= self._rtt_interval:
            self.publish()

    def expire_remote(self) -> None:
        """Observations older than remote_max_age_s stop counting (not while frozen)."""
        if self.remote_frozen:
            return
        now = self._clock()
        stale = {
            k
            for k in self._fresh_remote
            if now - self._remote[k].published_at > self.remote_max_age_s
        }
        if stale:
            self._fresh_remote -= stale
            log.warning("%d observation(s) from other nodes expired", len(stale))
            self.publish()

    # -- the published view ------------------------------------------------------------------
    def publish(self) -> HealthView:
        if self.external_views:
            return self.view
        backends: dict[tuple[str, str], BackendHealth] = {}
        now = self._clock()
        for pool, backend, monitor in self._monitored():
            key = (pool.name, backend.name)
            probed = self._verdict(pool, backend, monitor)
            previous = self._verdicts.get(key)
            if previous is not None and previous != probed and probed != "unknown":
                # The first verdict after a start is news only when it is bad.
                level = (
                    logging.INFO
                    if previous == "unknown" and probed == "healthy"
                    else logging.WARNING
                )
                log.log(
                    level, "backend %s/%s is %s (was %s)", pool.name, backend.name, probed, previous
                )
                self._event(
                    HealthEvent(
                        now,
                        "backend",
                        f"{pool.name}/{backend.name}",
                        previous,
                        probed,
                        "quorum of probe sources",
                    )
                )
            self._verdicts[key] = probed
            override = self.backend_overrides.get(key)
            rtt = {s: h.rtt for s, h in self.source_states(pool, backend).items() if h.rtt}
            backends[key] = BackendHealth(
                healthy=_effective(probed, override, monitor),
                probed=probed,  # type: ignore[arg-type]
                override=override,  # type: ignore[arg-type]
                rtt=MappingProxyType(rtt),
            )
        for key, override in self.backend_overrides.items():
            if key not in backends:  # an unmonitored backend can still be overridden
                backends[key] = BackendHealth(healthy=override != "down", override=override)  # type: ignore[arg-type]
        last = self.view
        pool_overrides = dict(self.pool_overrides)
        trickle_overrides = dict(self.trickle_overrides)
        same_states = (
            pool_overrides == last.pool_overrides
            and trickle_overrides == last.trickle_overrides
            and backends.keys() == last.backends.keys()
            and all(
                (b.healthy, b.probed, b.override) == (p.healthy, p.probed, p.override)
                for key, b in backends.items()
                for p in (last.backends[key],)
            )
        )
        self.view = HealthView(
            generation=last.generation + 1,
            states_generation=last.states_generation + (0 if same_states else 1),
            backends=MappingProxyType(backends),
            pool_overrides=MappingProxyType(pool_overrides),  # type: ignore[arg-type]
            trickle_overrides=MappingProxyType(trickle_overrides),
        )
        self._last_publish = now
        for listener in self.view_listeners:
            listener(self.view)
        return self.view

    def _verdict(self, pool: Pool, backend: Backend, monitor: Monitor) -> str:
        states = [h.state.state for h in self.source_states(pool, backend).values()]
        if all(s == "unknown" for s in states):
            return "unknown"
        down = sum(
            1
            for s in states
            if s == "unhealthy" or (s == "unknown" and monitor.initial == "unhealthy")
        )
        quorum = monitor.quorum or len(states) // 2 + 1
        return "unhealthy" if down >= quorum else "healthy"

    # -- overrides ---------------------------------------------------------------------------
    def set_backend_override(self, pool: str, backend: str, state: str | None) -> None:
        snap = self._require_snapshot()
        p = snap.config.pools.get(pool)
        if p is None or all(b.name != backend for b in p.backends):
            raise KeyError(f"no backend {backend!r} in pool {pool!r}")
        if state is not None and state not in BACKEND_STATES:
            raise OverrideError(f"state must be one of {', '.join(BACKEND_STATES)}")
        self._change(self.backend_overrides, (pool, backend), state, f"backend {pool}/{backend}")

    def set_pool_override(self, pool: str, state: str | None) -> None:
        if pool not in self._require_snapshot().config.pools:
            raise KeyError(f"no pool {pool!r}")
        if state is not None and state not in POOL_STATES:
            raise OverrideError(f"state must be one of {', '.join(POOL_STATES)}")
        self._change(self.pool_overrides, pool, state, f"pool {pool}")

    def set_trickle_override(self, lb: str, ratio: float | None) -> None:
        if lb not in self._require_snapshot().config.load_balancers:
            raise KeyError(f"no load balancer {lb!r}")
        if ratio is not None and (isinstance(ratio, bool) or not 0.0 <= ratio <= 1.0):
            raise OverrideError("trickle_ratio must be a number from 0.0 to 1.0")
        self._change(self.trickle_overrides, lb, ratio, f"load balancer {lb} trickle_ratio")

    def _change(self, table: dict[Any, Any], key: Any, value: Any, subject: str) -> None:
        old = table.get(key)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
        self.overrides_updated_at = self._clock()
        self._save_overrides()
        document = self.overrides_document()
        for listener in self.override_listeners:
            listener(document)
        self.override_changes_total += 1
        log.warning("override %s: %s -> %s", subject, old, value)
        self._event(HealthEvent(self._clock(), "override", subject, str(old), str(value), "admin"))
        self.publish()

    def _require_snapshot(self) -> Snapshot:
        if self._snapshot is None:
            raise RuntimeError("no configuration loaded")
        return self._snapshot

    # -- persistence -------------------------------------------------------------------------
    def _overrides_path(self) -> Path | None:
        return self.state_dir / OVERRIDES_FILE if self.state_dir else None

    def overrides_document(self) -> dict[str, Any]:
        return {
            "backends": {f"{p}/{b}": s for (p, b), s in sorted(self.backend_overrides.items())},
            "pools": dict(sorted(self.pool_overrides.items())),
            "load_balancers": {
                k: {"trickle_ratio": v} for k, v in sorted(self.trickle_overrides.items())
            },
            "updated_at": self.overrides_updated_at,
        }

    def apply_overrides(self, document: dict[str, Any]) -> None:
        """Overrides made on another node (newest wins): adopt, persist, publish."""
        backends, pools, trickle = _parse_overrides(document)
        self.backend_overrides, self.pool_overrides = backends, pools
        self.trickle_overrides = trickle
        self.overrides_updated_at = float(document.get("updated_at", self._clock()))
        self._save_overrides()
        self.override_changes_total += 1
        origin = document.get("node", "?")
        log.warning("overrides from node %s applied", origin)
        self._event(
            HealthEvent(
                self._clock(), "override", "all overrides", "-", "shared", f"from node {origin}"
            )
        )
        self.publish()

    def _save_overrides(self) -> None:
        path = self._overrides_path()
        if path is not None:
            write_atomically(path, json.dumps(self.overrides_document(), indent=2) + "\n")

    def _load_overrides(self) -> None:
        path = self._overrides_path()
        if path is None or not path.exists():
            return
        try:
            data = json.loads(path.read_text())
            backends, pools, trickle = _parse_overrides(data)
            self.overrides_updated_at = float(data.get("updated_at", 0.0))
        except (ValueError, TypeError, KeyError, AttributeError, OSError) as exc:
            aside = path.with_name(f"{path.name}.corrupt-{int(self._clock())}")
            path.replace(aside)
            log.error(
                "state file %s is unreadable (%s): moved to %s, starting without overrides",
                path,
                exc,
                aside,
            )
            return
        self.backend_overrides = backends
        self.pool_overrides = pools
        self.trickle_overrides = trickle
        count = len(backends) + len(pools) + len(trickle)
        if count:
            log.info("loaded %d override(s) from %s", count, path)

    def _event(self, event: HealthEvent) -> None:
        self.events.append(event)
        for listener in self.listeners:
            listener(event)


def _parse_overrides(
    data: dict[str, Any],
) -> tuple[dict[tuple[str, str], str], dict[str, str], dict[str, float]]:
    """The overrides document (state file, Redis) → tables; ValueError when malformed."""
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
    return backends, pools, trickle


def _effective(probed: str, override: str | None, monitor: Monitor) -> bool:
    if override == "down":
        return False
    if override == "up":
        return True
    if probed == "unknown":
        return monitor.initial != "unhealthy"  # unknown counts as healthy by default
    return probed == "healthy"


def write_atomically(path: Path, text: str) -> None:
    """Temp file in the same directory, fsync, rename over the old file, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
