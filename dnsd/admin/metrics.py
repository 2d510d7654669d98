"""Prometheus metrics (prometheus-client). Names: dnsd_<subsystem>_<name>[_total|_seconds].

Counters and histograms are updated as things happen; gauges that mirror state are read
at scrape time by collectors, so they can never drift from what the server serves. Each
component registers its own (`Metrics.register`): the query counts here (each answering
loop's `dnsd.tally.Tally`, rendered at scrape), config and health state
(dnsd.admin.state_metrics), the active pools (dnsd.admin.active_pool_metrics), and in their
own modules the TCP listener, rate limiting, the Redis bus and the answer caches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from dnsd.events import Event
from dnsd.health.fsm import ProbeResult
from dnsd.health.probes import ProbeTarget
from dnsd.tally import LATENCY_BUCKETS, Tally

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PUBLISH_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


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
            "dnsd_failovers",
            "Failover events: regions of the LB left their first-choice pool",
            ["lb"],
            registry=r,
        )
        self.publish_seconds = Histogram(
            "dnsd_health_publish_seconds",
            "Event-loop time one health view publication took, listeners included "
            "(change=states: a verdict or override moved; rtt: only RTTs)",
            ["change"],
            buckets=PUBLISH_BUCKETS,
            registry=r,
        )
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
        return {
            "queries": queries,
            "dropped": dropped,
            "latency": latency,
            "latency_sum": latency_sum,
            "lb": lb,
            "fallback": fallback,
            "transfers": dict(self.transfer_counts),
            "transfer_bytes": dict(self.transfer_bytes),
        }

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
