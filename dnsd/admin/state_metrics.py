"""Gauges read at scrape time from what is served: the config and health state
(`StateCollector`), and the cockpit — overrides in force, the build, the GeoIP age
(`CockpitCollector`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from dnsd.health.overrides import entry_key
from dnsd.health.store import HealthStore
from dnsd.snapshot import SnapshotHolder


class StateCollector(Collector):
    """The config being served and the health published: generations, backend and pool
    health, EWMA RTTs, per-source probe transitions."""

    def __init__(self, holder: SnapshotHolder, store: HealthStore) -> None:
        self.holder, self.store = holder, store

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        snap, store = self.holder.current, self.store
        view = store.view
        gen = GaugeMetricFamily(
            "dnsd_config_generation", "Generation of the configuration being served"
        )
        gen.add_metric([], snap.generation)
        yield gen
        hgen = GaugeMetricFamily(
            "dnsd_health_generation", "Generation of the published health view"
        )
        hgen.add_metric([], view.generation)
        yield hgen
        up = GaugeMetricFamily(
            "dnsd_backend_up",
            "1 when the backend answers (probes, quorum and overrides applied)",
            labels=["pool", "backend"],
        )
        probed = GaugeMetricFamily(
            "dnsd_backend_probed_up",
            "1 when the probes find the backend healthy (or it is not monitored), "
            "overrides not applied",
            labels=["pool", "backend"],
        )
        override = GaugeMetricFamily(
            "dnsd_backend_override",
            "1 for the state an operator override forces on the backend (only while set)",
            labels=["pool", "backend", "state"],
        )
        rtt_s = GaugeMetricFamily(
            "dnsd_probe_rtt_seconds",
            "EWMA probe round-trip time per probe source",
            labels=["pool", "backend", "source"],
        )
        rtt = GaugeMetricFamily(  # deprecated: the same in ms, kept for existing dashboards
            "dnsd_backend_rtt_ewma_ms",
            "EWMA probe RTT per source region in ms (deprecated: dnsd_probe_rtt_seconds)",
            labels=["pool", "backend", "source"],
        )
        degraded = GaugeMetricFamily(
            "dnsd_backend_quorum_degraded",
            "1 while fewer than a quorum of the backend's probe sources are fresh (its verdict "
            "is held, or decided by the fresh sources after quorum_hold)",
            labels=["pool", "backend"],
        )
        # Per monitor, its backend with the fewest fresh sources: what an alert must see.
        fresh: dict[str, int] = {}
        pools = GaugeMetricFamily("dnsd_pool_up", "1 when the pool is healthy", labels=["pool"])
        pool_override = GaugeMetricFamily(
            "dnsd_pool_override",
            "1 for the state an operator override forces on the pool (only while set)",
            labels=["pool", "state"],
        )
        for pool in snap.config.pools.values():
            pools.add_metric([pool.name], 1.0 if view.pool_healthy(pool) else 0.0)
            forced = view.pool_overrides.get(pool.name)
            if forced is not None:
                pool_override.add_metric([pool.name, forced], 1.0)
            for backend in pool.backends:
                health = view.backend(pool, backend)
                names = [pool.name, backend.name]
                up.add_metric(names, 1.0 if health.healthy else 0.0)
                probed.add_metric(names, 0.0 if health.probed in ("unhealthy", "unknown") else 1.0)
                if health.override:
                    override.add_metric([*names, health.override], 1.0)
                if health.probed != "unmonitored":
                    degraded.add_metric(names, 1.0 if health.quorum_degraded else 0.0)
                    monitor = store.monitor_for(pool, backend)
                    if monitor is not None:
                        seen = fresh.get(monitor.name, health.sources_fresh)
                        fresh[monitor.name] = min(seen, health.sources_fresh)
                for source, sample in health.rtt.items():
                    rtt_s.add_metric([*names, source], sample.ewma_ms / 1000.0)
                    rtt.add_metric([*names, source], sample.ewma_ms)
        yield up
        yield probed
        yield override
        yield rtt_s
        yield rtt
        yield pools
        yield pool_override
        yield degraded
        sources_fresh = GaugeMetricFamily(
            "dnsd_health_sources_fresh",
            "Probe sources of the monitor whose observations count (the fewest of its backends)",
            labels=["monitor"],
        )
        for name, count in sorted(fresh.items()):
            sources_fresh.add_metric([name], float(count))
        yield sources_fresh
        probes = CounterMetricFamily("dnsd_probe_transitions", "Per-source probe state changes")
        probes.add_metric([], store.transitions_total)
        yield probes


class CockpitCollector(Collector):
    """Operator overrides in force, the build and the GeoIP database's age (few samples:
    read at every scrape)."""

    def __init__(
        self,
        holder: SnapshotHolder,
        store: HealthStore,
        serving_loop: Callable[[], str],
        version: str,
    ) -> None:
        self.holder, self.store = holder, store
        self.serving_loop, self.version = serving_loop, version

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._overrides()
        build = GaugeMetricFamily(
            "dnsd_build_info", "The running dnsd", labels=["version", "serving_loop"]
        )
        build.add_metric([self.version, self.serving_loop()], 1.0)
        yield build
        geo = self.holder.current.geo
        if geo is not None:
            built = GaugeMetricFamily(
                "dnsd_geoip_build_timestamp_seconds",
                "When the GeoIP database being used was built (Unix time, its metadata)",
            )
            built.add_metric([], float(geo.build_epoch))
            yield built

    def _overrides(self) -> Iterator[GaugeMetricFamily]:
        """Active overrides by kind, and per override since and until when (those are
        few: set by people)."""
        overrides = self.store.overrides
        tables = (("backend", "backends"), ("pool", "pools"), ("load_balancer", "trickle"))
        active = GaugeMetricFamily(
            "dnsd_overrides_active", "Operator overrides in force", labels=["kind"]
        )
        since = GaugeMetricFamily(
            "dnsd_override_since_timestamp_seconds",
            "When the override in force was set (Unix time)",
            labels=["kind", "name"],
        )
        expires = GaugeMetricFamily(
            "dnsd_override_expires_timestamp_seconds",
            "When the override removes itself (Unix time; only overrides with an expiry)",
            labels=["kind", "name"],
        )
        for kind, table_name in tables:
            table = getattr(overrides, table_name)
            active.add_metric([kind], float(len(table)))
            for key in table:
                entry = entry_key(table_name, key)
                name = entry.split("/", 1)[1]
                meta = overrides.meta.get(entry)
                version = overrides.versions.get(entry)
                set_at = meta.since if meta is not None and meta.since else None
                if set_at is None and version is not None:
                    set_at = version[0]
                if set_at is not None:
                    since.add_metric([kind, name], set_at)
                if meta is not None and meta.expires is not None:
                    expires.add_metric([kind, name], meta.expires)
        yield active
        yield since
        yield expires
