"""Prometheus metrics (prometheus-client). Names: dnsd_<subsystem>_<name>[_total|_seconds].

Counters and histograms are updated as things happen; gauges that mirror state are read
at scrape time by collectors, so they can never drift from what the server serves. Each
component registers its own (`Metrics.register`): the query counts here, config and
health state (`StateCollector`), and in their own modules the TCP listener, rate limiting,
the Redis bus and the answer caches.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from dnslib import QTYPE, RCODE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from dnsd.events import Event
from dnsd.health.fsm import ProbeResult
from dnsd.health.overrides import entry_key
from dnsd.health.probes import ProbeTarget
from dnsd.health.store import HealthStore
from dnsd.snapshot import SnapshotHolder

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PUBLISH_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5)
KNOWN_QTYPES = frozenset(
    {"A", "AAAA", "CNAME", "MX", "TXT", "NS", "SOA", "SRV", "CAA", "PTR", "ANY", "DS", "HTTPS"}
)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # Per-query counts: one Tally per answering loop (each thread writes only its
        # own), rendered as dnsd_queries_total, dnsd_queries_dropped_total and the
        # dnsd_answer_latency_seconds histogram at scrape time.
        self._tallies: list[Tally] = []
        self._texts: list[Callable[[], bytes]] = []
        self.lb_counts: dict[tuple[str, str, str], int] = {}  # (lb, pool, region)
        self.fallback_counts: dict[str, int] = {}
        # Zone transfers this process served or refused: (zone, type, result), (zone, type).
        self.transfer_counts: dict[tuple[str, str, str], int] = {}
        self.transfer_bytes: dict[tuple[str, str], int] = {}
        # Answer caches count their hot path's decisions themselves (dnsd.fastpath).
        self._decision_tables: list[
            tuple[Mapping[tuple[str, str, str], int], Mapping[str, int]]
        ] = []
        # --workers: each worker's latest report, and what retired workers had counted.
        self._workers: dict[int, dict[str, Any]] = {}
        self._retired: dict[str, Any] = {}
        self.transitions = Counter(
            "dnsd_health_transitions_total", "Health state changes", ["kind", "new"], registry=r
        )
        self.probe_latency = Histogram(
            "dnsd_probe_latency_seconds",
            "Successful probe round-trip time",
            ["monitor", "source"],
            registry=r,
        )
        self.probe_results = Counter(
            "dnsd_probes_total", "Probes run", ["monitor", "source", "result"], registry=r
        )
        self.overrides = Counter(
            "dnsd_override_changes_total", "Operator override changes", ["kind"], registry=r
        )
        self.reloads = Counter("dnsd_reloads", "Configuration reloads", ["result"], registry=r)
        self.failovers = Counter(
            "dnsd_failovers", "Failover events: regions of the LB left their first-choice pool",
            ["lb"], registry=r,
        )  # fmt: skip
        self.publish_seconds = Histogram(
            "dnsd_health_publish_seconds",
            "Event-loop time one health view publication took, listeners included "
            "(change=states: a verdict or override moved; rtt: only RTTs)",
            ["change"], buckets=PUBLISH_BUCKETS, registry=r,
        )  # fmt: skip
        for result in ("ok", "failed"):
            self.reloads.labels(result)
        # The latest reload's outcome: an alert resolves at the next good reload (a
        # counter's increase would keep it firing for its whole window).
        self.last_reload_ok = Gauge(
            "dnsd_config_last_reload_successful",
            "1 when the latest reload succeeded (or none was tried), 0 after a failed one",
            registry=r,
        )
        self.last_reload_ok.set(1)
        self.register(_CountsCollector(self))

    def register(self, collector: Collector) -> None:
        """A component's own collector, read at every scrape."""
        self.registry.register(collector)

    def add_text(self, render: Callable[[], bytes]) -> None:
        """Exposition text rendered by a component itself (where samples are too many
        for the library's pace: ActivePools), appended at every scrape."""
        self._texts.append(render)

    # -- hooks -------------------------------------------------------------------------------
    def tally(self, transport: str) -> Tally:
        """The per-query counts of one answering loop (only that loop writes them)."""
        tally = Tally(transport)
        self._tallies.append(tally)
        return tally

    def count_decisions_of(
        self, lb_counts: Mapping[tuple[str, str, str], int], fallback_counts: Mapping[str, int]
    ) -> None:
        if not any(lb_counts is known for known, _ in self._decision_tables):  # once per cache
            self._decision_tables.append((lb_counts, fallback_counts))

    def serving_counts(self) -> dict[str, Any]:
        """This process's own query, latency and decision counts, as plain values (what
        a worker process reports to the main one)."""
        lb, fallback = dict(self.lb_counts), dict(self.fallback_counts)
        for lb_table, fallback_table in self._decision_tables:
            for key, count in list(lb_table.items()):
                lb[key] = lb.get(key, 0) + count
            for name, count in list(fallback_table.items()):
                fallback[name] = fallback.get(name, 0) + count
        queries: dict[tuple[str, str, str], int] = {}
        dropped: dict[str, int] = {}
        latency = [0] * (len(LATENCY_BUCKETS) + 1)
        latency_sum = 0.0
        for tally in self._tallies:
            for label, count in tally.totals().items():
                queries[label] = queries.get(label, 0) + count
            dropped[tally.transport] = dropped.get(tally.transport, 0) + tally.dropped[0]
            latency = [a + b for a, b in zip(latency, tally.latency, strict=True)]
            latency_sum += tally.sums[0]
        return {"queries": queries, "dropped": dropped, "latency": latency,
                "latency_sum": latency_sum, "lb": lb, "fallback": fallback,
                "transfers": dict(self.transfer_counts),
                "transfer_bytes": dict(self.transfer_bytes)}  # fmt: skip

    def set_worker_counts(self, worker: int, counts: dict[str, Any]) -> None:
        """The latest counts a worker process reported (dnsd.workers)."""
        self._workers[worker] = counts

    def retire_worker(self, worker: int) -> None:
        """A worker is gone: its last report stays in the totals (counters never go back)."""
        counts = self._workers.pop(worker, None)
        if counts is not None:
            self._retired = _add_counts(self._retired, counts)

    def totals(self) -> dict[str, Any]:
        """Every process's counts: this one's, the workers' latest reports, the retired."""
        total = _add_counts(self.serving_counts(), self._retired)
        for counts in list(self._workers.values()):
            total = _add_counts(total, counts)
        return total

    def decision_totals(self) -> tuple[dict[tuple[str, str, str], int], dict[str, int]]:
        total = self.totals()
        return total["lb"], total["fallback"]

    def observe_decision(
        self, lb: str, pool: str | None, region: str | None, fail_open: bool
    ) -> None:
        key = (lb, pool or "-", region or "-")
        self.lb_counts[key] = self.lb_counts.get(key, 0) + 1
        if fail_open:
            self.fallback_counts[lb] = self.fallback_counts.get(lb, 0) + 1

    def observe_transfer(self, zone: str, kind: str, result: str, size: int) -> None:
        """A zone transfer served or refused (dnsd.xfr.service; the event loop)."""
        key = (zone, kind, result)
        self.transfer_counts[key] = self.transfer_counts.get(key, 0) + 1
        if size:
            self.transfer_bytes[(zone, kind)] = self.transfer_bytes.get((zone, kind), 0) + size

    def observe_publish(self, seconds: float, states_changed: bool) -> None:
        self.publish_seconds.labels("states" if states_changed else "rtt").observe(seconds)

    def observe_event(self, event: Event) -> None:
        if event.kind == "override":
            self.overrides.labels(override_kind(event.subject)).inc()
        elif event.kind in ("probe", "backend_health"):
            kind = "probe" if event.kind == "probe" else "backend"
            self.transitions.labels(kind, str(event.details.get("new"))).inc()
        elif event.kind == "failover" and event.lb is not None:
            self.failovers.labels(event.lb).inc()

    def observe_probe(self, target: ProbeTarget, source: str, result: ProbeResult) -> None:
        outcome = "ok" if result.ok else ("local" if result.local else "failed")
        self.probe_results.labels(target.monitor, source, outcome).inc()
        if result.ok and result.rtt_ms is not None:
            self.probe_latency.labels(target.monitor, source).observe(result.rtt_ms / 1000.0)

    def render(self) -> bytes:
        return b"".join([generate_latest(self.registry), *(text() for text in self._texts)])


OVERRIDE_KINDS = ("backend", "pool", "load_balancer")  # the `kind` label of override metrics


def override_kind(subject: str) -> str:
    """The kind of what an `override` event is about. Its subject is "backend POOL/NAME",
    "pool NAME", "load balancer NAME trickle_ratio", or "all overrides" (another node's
    document merged) — the first word alone would say "load" for a load balancer."""
    if subject.startswith("load balancer "):
        return "load_balancer"
    head = subject.split(" ", 1)[0]
    return head if head in OVERRIDE_KINDS else "shared"


def _add_counts(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two serving_counts() summed (either may be empty)."""
    out: dict[str, Any] = {}
    for field in ("queries", "dropped", "lb", "fallback", "transfers", "transfer_bytes"):
        merged = dict(a.get(field, {}))
        for key, count in b.get(field, {}).items():
            merged[key] = merged.get(key, 0) + count
        out[field] = merged
    zero = [0] * (len(LATENCY_BUCKETS) + 1)
    out["latency"] = [
        x + y for x, y in zip(a.get("latency", zero), b.get("latency", zero), strict=True)
    ]
    out["latency_sum"] = a.get("latency_sum", 0.0) + b.get("latency_sum", 0.0)
    return out


FOLD_AT = 50_000


class Tally:
    """Query counts of one answering loop, keyed by dnsd.reply.count_key (flags, rcode,
    question type), and its answer-latency histogram. Only that loop writes them (see
    dnsd.serve.answering: the updates are inlined there); a scrape reads a copy. Folding into
    labelled totals happens under a lock so a scrape never sees a count twice or not at all."""

    buckets = LATENCY_BUCKETS
    fold_at = FOLD_AT

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.counts: dict[bytes, int] = {}
        self.folded: dict[tuple[str, str, str], int] = {}
        self.latency = [0] * (len(LATENCY_BUCKETS) + 1)
        self.sums = [0.0]
        self.dropped = [0]
        self._lock = threading.Lock()
        # Counts kept elsewhere under the same keys (the compiled loop's answer-table
        # counters, dnsd.fastpath): read with these, under this lock.
        self._sources: list[Callable[[], list[tuple[bytes, int]]]] = []

    def count_also(self, source: Callable[[], list[tuple[bytes, int]]]) -> None:
        self._sources.append(source)

    def absorb(self, take: Callable[[], list[tuple[bytes, int]]]) -> None:
        """Move what `take` returns (counts a source gives up) into this tally at once: a
        scrape sees them there or in the source, never in both or neither."""
        with self._lock:
            counts = self.counts
            for key, n in take():
                counts[key] = counts.get(key, 0) + n

    def fold(self) -> None:
        with self._lock:
            self._add(self.folded, list(self.counts.items()))
            self.counts.clear()

    def totals(self) -> dict[tuple[str, str, str], int]:
        with self._lock:
            totals = dict(self.folded)
            self._add(totals, list(self.counts.items()))  # list(): one step under the GIL
            for source in self._sources:
                self._add(totals, source())
        return totals

    def _add(self, into: dict[tuple[str, str, str], int], items: list[tuple[bytes, int]]) -> None:
        for key, count in items:
            label = (
                _qtype_of(key),  # dnsd.reply.count_key: flags, rcode, qtype
                RCODE.get(key[1] & 0x0F, "OTHER"),
                self.transport,
            )
            into[label] = into.get(label, 0) + count


def _qtype_of(key: bytes) -> str:
    """The question type in a count key (dnsd.reply.count_key): NONE without a question."""
    if len(key) < 4:
        return "NONE"
    name = QTYPE.get(struct.unpack_from("!H", key, 2)[0], "OTHER")
    return name if name in KNOWN_QTYPES else "OTHER"


def _counters(
    name: str, documentation: str, labels: list[str], counts: Mapping[Any, int]
) -> CounterMetricFamily:
    """A counter family from a {label value(s): count} table kept by the serving path."""
    family = CounterMetricFamily(name, documentation, labels=labels)
    for key, count in sorted(counts.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], count)
    return family


class _CountsCollector(Collector):
    """Query, latency and decision counts of every answering loop and worker process."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        counts = self.metrics.totals()  # every process's, with --workers
        yield _counters(
            "dnsd_queries",
            "DNS queries answered",
            ["qtype", "rcode", "transport"],
            counts["queries"],
        )
        yield _counters(
            "dnsd_queries_dropped",
            "Datagrams dropped (unparseable or responses)",
            ["transport"],
            counts["dropped"],
        )
        cumulative: list[tuple[str, float]] = []
        total = 0
        for bound, count in zip((*LATENCY_BUCKETS, float("inf")), counts["latency"], strict=True):
            total += count
            cumulative.append(("+Inf" if bound == float("inf") else str(bound), total))
        latency = HistogramMetricFamily("dnsd_answer_latency_seconds", "Time to build an answer")
        latency.add_metric([], cumulative, counts["latency_sum"])
        yield latency
        yield _counters(
            "dnsd_lb_answers",
            "Answers for load-balanced names",
            ["lb", "pool", "region"],
            counts["lb"],
        )
        yield _counters(
            "dnsd_fallback_answers",
            "Answers from the fallback pool because nothing was healthy",
            ["lb"],
            counts["fallback"],
        )
        yield _counters(
            "dnsd_transfers",
            "Zone transfers by outcome: full, incremental or current (served), refused, "
            "notauth or formerr; zone is empty unless it names a zone served here",
            ["zone", "type", "result"],
            counts["transfers"],
        )
        yield _counters(
            "dnsd_transfer_bytes",
            "Bytes of zone transfer messages sent",
            ["zone", "type"],
            counts["transfer_bytes"],
        )


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


# -- what answers now: active pool per client region, overrides, build, GeoIP age -----------
RegionStates = Callable[[Any, float], tuple[Mapping[str, str], Sequence[str]]]  # (lb, now)
AnsweringPool = Callable[[str], tuple[str, bool]]
ACTIVE_REFRESH_S = 5.0  # RTT-only publications are looked at this often at most
ACTIVE_FAMILIES = (
    ("dnsd_lb_active_pool", "1 for the pool answering clients of this region now (overrides "
     "and a trickle of 1.0 included; the innermost pool for nested load balancers)"),
    ("dnsd_lb_failed_over", "1 when the region is not answered by its first-choice pool "
     "(at any level)"),
    ("dnsd_lb_fail_open", "1 when some client region is answered by a fallback because "
     "nothing was healthy"),
)  # fmt: skip
ALL_DOWN = (
    "dnsd_lb_all_down", "1 while some client region of the load balancer is answered by "
    "this when_all_down rule (nothing healthy, the fallback pool included); 0 for the "
    "configured rule otherwise",
)  # fmt: skip
AllDownRule = Callable[[Any, Any, str], "str | None"]  # (config, lb, active chain) → rule
HEALTH_FAILOVER = (
    "dnsd_lb_failed_over_by_health", "Client regions off their first-choice pool because of "
    "health, not planned work: answered otherwise than the overrides, drains and manual "
    "failovers in force alone would answer them (what to page on)",
)  # fmt: skip
HealthFailed = Callable[[Any, float], Sequence[str]]  # (lb, now) → regions failed by health


class ActivePools:
    """For every load balancer and client region, the pool answering now and whether it is
    the first choice, read from the one computation the status document shows
    (`shared_region_states`, which steers once per class of alike load balancers).

    Rendered as exposition text by hand, not through prometheus-client: 10,000 load
    balancers are 310,000 samples, which the library formats at ~50 µs each (15 s
    measured on the CI machine). Here each class's per-region text is made once, each
    load balancer costs one join, and the text is kept until the snapshot or the health
    states change (RTT-only publications: at most every ACTIVE_REFRESH_S)."""

    def __init__(
        self,
        holder: SnapshotHolder,
        store: HealthStore,
        region_states: RegionStates,
        answering_pool: AnsweringPool,
        clock: Callable[[], float] = time.time,
        health_failed: HealthFailed | None = None,
        all_down_rule: AllDownRule | None = None,
    ) -> None:
        self.holder, self.store = holder, store
        self.all_down_rule = all_down_rule  # None: dnsd_lb_all_down not exported
        self.region_states, self.answering_pool = region_states, answering_pool
        self.health_failed = health_failed  # None: dnsd_lb_failed_over_by_health not exported
        self.clock = clock
        self._key: tuple[int, int, int, int] | None = None
        self._at = 0.0
        self._text = b""

    def text(self) -> bytes:
        snap, view, now = self.holder.current, self.store.view, self.clock()
        # Numbers, not the snapshot: an old one is freed off the loop (dnsd.reaper) only
        # when nothing else holds it.
        key = (id(snap), snap.generation, view.states_generation, view.generation)
        if self._key is not None and (
            key == self._key or (key[:3] == self._key[:3] and now - self._at < ACTIVE_REFRESH_S)
        ):
            return self._text
        self._text = self._render(snap, now)
        self._key, self._at = key, now
        return self._text

    def _render(self, snap: Any, now: float) -> bytes:
        active_lines: list[str] = []
        failed_lines: list[str] = []
        open_lines: list[str] = []
        health_lines: list[str] = []
        down_lines: list[str] = []
        # Per shared answer (a class of alike load balancers): its lines after the lb label.
        fragments: dict[int, tuple[Any, list[str], list[str], str]] = {}
        for lb in snap.config.load_balancers.values():
            active, failed = self.region_states(lb, now)
            fragment = fragments.get(id(active))
            if fragment is None or fragment[0] is not active:
                fragment = fragments[id(active)] = (active, *self._fragment(active, failed))
            name = _label(lb.name)
            head = f'dnsd_lb_active_pool{{lb="{name}",'
            active_lines.append(head + head.join(fragment[1]))
            head = f'dnsd_lb_failed_over{{lb="{name}",'
            failed_lines.append(head + head.join(fragment[2]))
            open_lines.append(f'dnsd_lb_fail_open{{lb="{name}"}} {fragment[3]}\n')
            if self.all_down_rule is not None:
                down_lines.extend(self._all_down(snap.config, lb, name, active))
            if self.health_failed is not None:
                # Cached per class; steered once more only for a class off its first choice.
                by_health = len(self.health_failed(lb, now)) if failed else 0
                health_lines.append(f'{HEALTH_FAILOVER[0]}{{lb="{name}"}} {by_health}.0\n')
        families = [*zip(ACTIVE_FAMILIES, (active_lines, failed_lines, open_lines), strict=True)]
        if self.health_failed is not None:
            families.append((HEALTH_FAILOVER, health_lines))
        if self.all_down_rule is not None:
            families.append((ALL_DOWN, down_lines))
        out: list[str] = []
        for (name, documentation), lines in families:
            out.append(f"# HELP {name} {documentation}\n# TYPE {name} gauge\n")
            out.extend(lines)
        return "".join(out).encode()

    def _all_down(self, config: Any, lb: Any, name: str, active: Mapping[str, str]) -> list[str]:
        """The lb's dnsd_lb_all_down lines: each rule answering some region now, and the
        configured rule (0 while nothing is down), so the series exists before it fires."""
        assert self.all_down_rule is not None
        if not any(path.endswith(")") for path in active.values()):  # no " (fail open)"
            return [f'{ALL_DOWN[0]}{{lb="{name}",rule="{lb.when_all_down}"}} 0.0\n']
        rules = {self.all_down_rule(config, lb, path) for path in active.values()} - {None}
        return [
            f'{ALL_DOWN[0]}{{lb="{name}",rule="{rule}"}} {"1.0" if rule in rules else "0.0"}\n'
            for rule in sorted({*rules, lb.when_all_down})
        ]

    def _fragment(
        self, active: Mapping[str, str], failed: Sequence[str]
    ) -> tuple[list[str], list[str], str]:
        """One class's lines after `{lb="…",` (each load balancer's label goes before
        each), and the fail-open value."""
        off_first = set(failed)
        active_parts: list[str] = []
        failed_parts: list[str] = []
        any_open = False
        for region, chain in active.items():
            pool, fail_open = self.answering_pool(chain)
            any_open = any_open or fail_open
            active_parts.append(f'region="{_label(region)}",pool="{_label(pool or "-")}"}} 1.0\n')
            value = "1.0" if region in off_first else "0.0"
            failed_parts.append(f'region="{_label(region)}"}} {value}\n')
        return active_parts, failed_parts, "1.0" if any_open else "0.0"


def _label(value: str) -> str:
    """A label value escaped as the text format wants it."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


class CockpitCollector(Collector):
    """Operator overrides in force, the build and the GeoIP database's age (few samples:
    read at every scrape)."""

    def __init__(
        self, holder: SnapshotHolder, store: HealthStore, serving_loop: Callable[[], str],
        version: str,
    ) -> None:  # fmt: skip
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
