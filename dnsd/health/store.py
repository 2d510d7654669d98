"""HealthStore: the mutable health state, published as immutable HealthView values.

Probes write results here; each (probe target, source region) has its own state machine
and RTT EWMA. The verdicts are pure functions (`verdict.py`: quorum, overrides applied,
the next view); what each source says and why a verdict is what it is is in `sources.py`;
overrides are validated, persisted and told as events by `overrides.py`; other nodes'
observations and their freshness live in `remote.py`. A new view is published at once on
every health transition or override change; RTT-only changes are published at most every
`rtt_publish_interval_s`, so 500 backends probed every second stay cheap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dnsd.config.model import Backend, Config, Monitor, Pool
from dnsd.events import EventLog
from dnsd.events.record import PROBE, SYSTEM, iso_z, make
from dnsd.health import ewma
from dnsd.health.fsm import ProbeResult, SourceState, State, on_result
from dnsd.health.overrides import (
    OverrideError,
    OverrideMeta,
    Overrides,
    PersistError,
    entry_key,
    override_event,
)
from dnsd.health.probes import ProbeTarget, target_of
from dnsd.health.remote import RemoteObservation, RemoteObservations
from dnsd.health.sources import SourceHealth, probe_cause
from dnsd.health.verdict import (
    QuorumVerdict,
    Verdict,
    effective,
    news_level,
    next_view,
    quorum_verdict,
)
from dnsd.health.view import BackendHealth, BackendOverride, HealthView, PoolOverride, RttSample
from dnsd.snapshot import NodeSettings, Snapshot

log = logging.getLogger("dnsd.health")

__all__ = ["HealthStore", "OverrideError", "PersistError"]


class HealthStore:
    def __init__(
        self,
        state_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
        rtt_publish_interval_s: float = 1.0,
        history: int = 500,
        events: EventLog | None = None,
    ) -> None:
        self.state_dir = state_dir
        self._clock = clock
        self._rtt_interval = rtt_publish_interval_s
        self._sources: dict[tuple[ProbeTarget, str], SourceHealth] = {}
        # What health is judged against: the snapshot's config and node, not the snapshot
        # (another snapshot serves the same config with other serials; holding the first
        # would keep its answer tables alive).
        self._config: Config | None = None
        self._node = NodeSettings()
        self._verdicts: dict[tuple[str, str], Verdict] = {}
        self._quorum: dict[tuple[str, str], QuorumVerdict] = {}  # how each verdict was reached
        self._last_publish = 0.0
        self.overrides = Overrides.load(state_dir, clock()) if state_dir else Overrides()
        self.node_name = "dnsd"  # who made an override, for ordering them across nodes
        # Health and override events (dnsd.events): the server's journal persists them.
        self.events = events if events is not None else EventLog(None, history)
        self.transitions_total = 0
        self.override_changes_total = 0
        # Several nodes (dnsd.cluster): observations from the others, and hooks to share ours.
        self.only_source: str | None = None  # probe only this source region (this node's)
        self.remote = RemoteObservations()
        self._targets: set[ProbeTarget] = set()  # every target the config probes (any node)
        self.observation_listeners: list[Callable[[ProbeTarget, str, SourceHealth], None]] = []
        self.override_listeners: list[Callable[[dict[str, Any]], None]] = []
        self.view = HealthView()
        self.view_listeners: list[Callable[[HealthView], None]] = []  # every view published
        # (seconds the publication took with its listeners, whether states changed)
        self.on_published: Callable[[float, bool], None] | None = None

    @property
    def config(self) -> Config | None:
        """The config the store judges health against (None before the first)."""
        return self._config

    # The override tables, read by the status document and tests.
    @property
    def backend_overrides(self) -> dict[tuple[str, str], BackendOverride]:
        return self.overrides.backends

    @property
    def pool_overrides(self) -> dict[str, PoolOverride]:
        return self.overrides.pools

    @property
    def trickle_overrides(self) -> dict[str, float]:
        return self.overrides.trickle

    # -- what to probe -----------------------------------------------------------------------
    def monitor_for(self, pool: Pool, backend: Backend) -> Monitor | None:
        name = backend.monitor or pool.monitor
        return self._config.monitors.get(name) if self._config and name else None

    def sources_of(self, monitor: Monitor) -> tuple[str, ...]:
        if monitor.sources:
            return monitor.sources
        return (self._node.probe_source,)

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
        if self._config is None:
            return
        for pool in self._config.pools.values():
            for backend in pool.backends:
                monitor = self.monitor_for(pool, backend)
                if monitor is not None:
                    yield pool, backend, monitor

    def set_snapshot(self, snapshot: Snapshot) -> None:
        """A new config: keep the state of targets that remain, forget the others."""
        self._config, self._node = snapshot.config, snapshot.node
        wanted = set(self.probe_plan())
        for key in [k for k in self._sources if k not in wanted]:
            del self._sources[key]
        targets = {target for target, _ in wanted} | {
            target_of(b, m) for _, b, m in self._monitored()
        }
        self._targets = targets
        self.remote.keep_only(targets)
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
            if transition.old != "unknown":  # a first result after a start is no news
                why = "probe ok" if result.ok else (result.error or "probe failed")
                self.events.add(
                    make(
                        transition.at,
                        "probe",
                        f"{why} from {source}",
                        PROBE,
                        subject=f"{target.host}:{target.port}",
                        source=source,
                        old=transition.old,
                        new=transition.new,
                        reason=transition.reason,
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
            remote = self.remote.current((target, source))
            if local is not None:
                out[source] = local
            elif remote is not None:
                state = SourceState(state=remote.state, since=remote.published_at)
                out[source] = SourceHealth(state, remote.rtt, node="remote")
            elif (lost := self.remote.stale((target, source))) is not None:
                state = SourceState(state=lost.state, since=lost.published_at)
                out[source] = SourceHealth(state, None, node="remote", stale=True)
            else:
                out[source] = SourceHealth(SourceState())
        return out

    # -- other nodes' observations -----------------------------------------------------------
    def apply_remote(
        self,
        target: ProbeTarget,
        source: str,
        state: State,
        ewma_ms: float | None,
        samples: int,
        last_at: float,
        published_at: float,
    ) -> bool:
        """Another node's observation; False when this config does not probe `target`
        (nothing is stored: the table holds only what the config names)."""
        if target not in self._targets:
            return False
        key = (target, source)
        if key in self._sources and self.only_source is None:
            return True  # probed here: our own observation wins
        previous = self.remote.previous_state(key)
        rtt = RttSample(ewma_ms, samples, last_at) if ewma_ms is not None else None
        if self.remote.add(key, RemoteObservation(state, rtt, published_at), self._clock()):
            if previous is not None and previous not in (state, "unknown"):
                self.events.add(
                    make(
                        published_at,
                        "probe",
                        f"{state} from {source} (another node)",
                        PROBE,
                        subject=f"{target.host}:{target.port}",
                        source=source,
                        old=previous,
                        new=state,
                        reason="observed by another node",
                    )
                )
            self.publish()
        elif self._clock() - self._last_publish >= self._rtt_interval:
            self.publish()
        return True

    def expire_remote(self) -> None:
        """Observations older than the bus's max age stop counting (not while it is down)."""
        now = self._clock()
        stale = self.remote.expire(now)
        if stale:
            log.warning("%d observation(s) from other nodes expired", stale)
        if stale or self._hold_ran_out(now):
            self.publish()

    def _hold_ran_out(self, now: float) -> bool:
        """A held verdict whose `quorum_hold` is over: the fresh sources may decide now."""
        for pool, backend, monitor in self._monitored():
            q = self._quorum.get((pool.name, backend.name))
            hold = monitor.quorum_hold_s
            held = q is not None and q.mode == "held" and q.since is not None
            if held and hold is not None and q is not None and now - (q.since or now) >= hold:
                return True
        return False

    # -- the published view ------------------------------------------------------------------
    def publish(self) -> HealthView:
        started = time.perf_counter()
        backends: dict[tuple[str, str], BackendHealth] = {}
        now = self._clock()
        overrides = self.overrides
        for pool, backend, monitor in self._monitored():
            key = (pool.name, backend.name)
            sources = self.source_states(pool, backend)
            previous = self._verdicts.get(key)
            votes = [h.vote for h in sources.values()]
            before = self._quorum.get(key)
            decision = quorum_verdict(
                votes,
                monitor.quorum,
                monitor.initial,
                previous,
                before.since if before else None,
                now,
                monitor.quorum_hold_s,
            )
            self._quorum[key] = decision
            fresh = sum(1 for v in votes if v is not None)
            self._quorum_news(pool.name, backend.name, before, decision, fresh, len(votes), now)
            probed = decision.verdict
            level = news_level(previous, probed)
            if level is not None:
                log.log(
                    level, "backend %s/%s is %s (was %s)", pool.name, backend.name, probed, previous
                )
                if previous != "unknown":  # a first verdict after a start is not an event
                    self.events.add(
                        make(
                            now,
                            "backend_health",
                            probe_cause(sources, probed),
                            PROBE,
                            pool=pool.name,
                            backend=backend.name,
                            old=previous,
                            new=probed,
                        )
                    )
            self._verdicts[key] = probed
            override = overrides.backends.get(key)
            backends[key] = BackendHealth(
                healthy=effective(probed, override, monitor.initial),
                probed=probed,
                override=override,
                rtt=MappingProxyType({s: h.rtt for s, h in sources.items() if h.rtt}),
                quorum_degraded=decision.mode != "ok",
                quorum_since=decision.since,
                quorum_mode=decision.mode,
                sources_fresh=fresh,
            )
        for key in [k for k in self._quorum if k not in backends]:
            del self._quorum[key]  # a backend the config no longer monitors
        for key, override in overrides.backends.items():
            if key not in backends:  # an unmonitored backend can still be overridden
                backends[key] = BackendHealth(healthy=override != "down", override=override)
        last_view = self.view
        self.view = next_view(last_view, backends, overrides.pools, overrides.trickle)
        self._last_publish = now
        for listener in self.view_listeners:
            listener(self.view)
        if self.on_published is not None:  # the event-loop time one health change costs
            changed = self.view.states_generation != last_view.states_generation
            self.on_published(time.perf_counter() - started, changed)
        return self.view

    def _quorum_news(
        self,
        pool: str,
        backend: str,
        before: QuorumVerdict | None,
        after: QuorumVerdict,
        fresh: int,
        sources: int,
        now: float,
    ) -> None:
        """A `quorum` event and a log line when a backend loses its quorum, when the fresh
        sources take over from the held verdict, and when the quorum is back (docs/health.md
        "Lost quorum": never silent)."""
        old = before.mode if before else "ok"
        if old == after.mode:
            return
        if after.mode == "held":
            why = f"quorum lost: {fresh} of {sources} sources fresh, verdict held"
        elif after.mode == "fresh":
            why = f"quorum lost: {fresh} of {sources} sources fresh decide"
        else:
            why = "quorum back"
        self.events.add(
            make(
                now,
                "quorum",
                why,
                SYSTEM,
                pool=pool,
                backend=backend,
                old=old,
                new=after.mode,
                verdict=after.verdict,
                sources_fresh=fresh,
                since=iso_z(after.since) if after.since is not None else None,
            )
        )

    # -- overrides ---------------------------------------------------------------------------
    def set_backend_override(
        self, pool: str, backend: str, state: str | None, meta: OverrideMeta | None = None
    ) -> None:
        Overrides.check_backend(self._require_config(), pool, backend, state)
        self._change("backends", (pool, backend), state, f"backend {pool}/{backend}", meta)

    def set_pool_override(
        self, pool: str, state: str | None, meta: OverrideMeta | None = None
    ) -> None:
        Overrides.check_pool(self._require_config(), pool, state)
        self._change("pools", pool, state, f"pool {pool}", meta)

    def set_trickle_override(
        self, lb: str, ratio: float | None, meta: OverrideMeta | None = None
    ) -> None:
        Overrides.check_trickle(self._require_config(), lb, ratio)
        self._change("trickle", lb, ratio, f"load balancer {lb} trickle_ratio", meta)

    def expire_overrides(self) -> int:
        """Remove every override whose expiry has passed (docs/health.md, overrides): each
        removal is an `override` event with the cause `expired`. Also right after a
        restart, since the expiry is persisted with the override."""
        expired = self.overrides.expired(self._clock())
        for table, key in expired:
            name = "/".join(key) if isinstance(key, tuple) else key
            subject = {"backends": "backend", "pools": "pool"}.get(table, "load balancer")
            suffix = " trickle_ratio" if table == "trickle" else ""
            self._change(table, key, None, f"{subject} {name}{suffix}", cause="expired")
        return len(expired)

    def _change(
        self,
        table_name: str,
        key: Any,
        value: Any,
        subject: str,
        meta: OverrideMeta | None = None,
        cause: str = "admin",
    ) -> None:
        """Persist first, then apply: an override the state file could not hold would be
        lost at the next restart, so it is refused (PersistError) and nothing changes."""
        changed = self.overrides.copy()
        table: dict[Any, Any] = getattr(changed, table_name)
        old = table.get(key)
        name = entry_key(table_name, key)
        if value is None:
            table.pop(key, None)
            changed.meta.pop(name, None)
        else:
            table[key] = value
            if meta is not None:
                changed.meta[name] = meta
            else:  # set without metadata (in-process): no expiry, like before
                changed.meta.pop(name, None)
        now = self._clock()
        # Strictly newer than any version seen, even with a clock behind another node's.
        newest = max((at for at, _ in changed.versions.values()), default=0.0)
        changed.updated_at = max(now, newest + 1e-6)
        changed.versions[name] = (changed.updated_at, self.node_name)
        self._save(changed)
        self.overrides = changed
        document = self.overrides_document()
        for listener in self.override_listeners:
            listener(document)
        self.override_changes_total += 1
        log.warning(
            "override %s: %s -> %s%s", subject, old, value, f" ({cause})" * (cause != "admin")
        )
        self.events.add(override_event(table_name, key, old, value, meta, cause, self._clock()))
        self.publish()

    def use_clock(self, clock: Callable[[], float]) -> None:
        """Stamp and age shared state on `clock` (a cluster's common one) from now on."""
        self._clock = clock

    def now(self) -> float:
        """The time overrides are stamped and expire on (the cluster's, with --redis)."""
        return self._clock()

    def _require_config(self) -> Config:
        if self._config is None:
            raise RuntimeError("no configuration loaded")
        return self._config

    def overrides_document(self) -> dict[str, Any]:
        return self.overrides.document()

    def apply_overrides(self, document: dict[str, Any]) -> bool:
        """Overrides made on another node, merged entry by entry (the newer version of each
        wins): persist, publish. False when they change nothing here."""
        adopted = self.overrides.merged(Overrides.from_document(document, self._clock()))
        if adopted.document() == self.overrides.document():
            return False
        self._save(adopted)
        self.overrides = adopted
        self.override_changes_total += 1
        origin = document.get("node", "?")
        log.warning("overrides from node %s applied", origin)
        self.events.add(
            make(
                self._clock(),
                "override",
                f"overrides from node {origin}",
                SYSTEM,
                subject="all overrides",
                old="-",
                new="shared",
            )
        )
        self.publish()
        return True

    def _save(self, overrides: Overrides) -> None:
        if self.state_dir is None:
            return
        try:
            overrides.save(self.state_dir)
        except OSError as exc:
            log.error("cannot write the state file in %s: %s", self.state_dir, exc.strerror)
            raise PersistError(
                f"the override was not applied: cannot write the state file ({exc.strerror})"
            ) from None
