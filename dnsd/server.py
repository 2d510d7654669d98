"""Composition root: load the config, bind the listeners, reload on SIGHUP, stop on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import socket
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from dnsd import __version__
from dnsd.admin.active_pool_watch import ActivePoolWatch, RegionStates
from dnsd.admin.app import build_app
from dnsd.admin.audit import AuditLog
from dnsd.admin.context import GATE
from dnsd.admin.gate import Token, TokenGate
from dnsd.admin.guard import ConnectionGuard
from dnsd.admin.metrics import ActivePools, CockpitCollector, Metrics, StateCollector
from dnsd.admin.status import answering_pool, region_details_under, shared_region_states
from dnsd.admin.webhooks import Alerts, Webhook
from dnsd.config.loader import LoadCancelled, ParseCache
from dnsd.dnssec.apex import with_keys
from dnsd.errors import ConfigError
from dnsd.events import EventLog, current_actor
from dnsd.events.record import SYSTEM, current_cause, make
from dnsd.fastpath import AnswerCache, AnswerCaches
from dnsd.geo.age import log_database as log_geoip_database
from dnsd.geo.database import GeoDatabase, reopened
from dnsd.health.scheduler import ProbeScheduler
from dnsd.health.store import HealthStore, PersistError
from dnsd.health.view import HealthView
from dnsd.loading import key_files, load_snapshot, zone_keys
from dnsd.net import SERVING_LOOPS, UDP_LOOPS
from dnsd.net.counters import NetCounters
from dnsd.net.descriptors import share_descriptors
from dnsd.net.rrl import ResponseRateLimiter, RrlSettings
from dnsd.net.sdnotify import SystemdNotifier
from dnsd.net.supervisor import ServingLoops
from dnsd.net.tcp import TcpHandler, TcpLimits
from dnsd.net.udp import Answerer, UdpProtocol
from dnsd.net.udp_thread import BatchAnswerer, CacheHits, UdpThread
from dnsd.process_tools import in_daemon_thread, release_free_memory
from dnsd.provision.writer import ConfigWriter
from dnsd.ratelog import RateLimitedLog
from dnsd.reaper import release_later
from dnsd.reload_result import ReloadResult
from dnsd.reply import Client
from dnsd.request import DecisionObserver, Request
from dnsd.resolve import resolve
from dnsd.serverfile_reload import ServerFile
from dnsd.serverfile_reload import apply as apply_server_file
from dnsd.snapshot import (
    NodeSettings,
    Snapshot,
    SnapshotHolder,
    with_serials,
)
from dnsd.workers import Follower, WorkerPool
from dnsd.xfr.notify import NotifySender
from dnsd.xfr.service import TransferService
from dnsd.xfr.versions import ZoneVersions

if TYPE_CHECKING:
    from dnsd.cluster.bus import RedisBus
    from dnsd.cluster.config_channel import ConfigSync

log = logging.getLogger("dnsd.server")
ERROR_LOG = RateLimitedLog(log)  # per-query errors: a bounded amount of log


@dataclass(frozen=True, slots=True)
class ServerOptions:
    config_dir: Path
    listen: tuple[tuple[str, int], ...] = (("127.0.0.1", 5353),)
    tcp_limits: TcpLimits = field(default_factory=TcpLimits)
    geoip: Path | None = None  # None: the embedded database
    node: NodeSettings = field(default_factory=NodeSettings)
    state_dir: Path | None = None  # persisted overrides; None keeps them in memory only
    admin: tuple[str, int] | None = None  # the admin HTTP server; None: not started
    admin_token: str | None = None  # bearer token for admin writes; None: writes refused
    tokens: tuple[Token, ...] = ()  # the server file's scoped tokens (dnsd.admin.gate)
    webhooks: tuple[Webhook, ...] = ()  # alerts (dnsd.admin.webhooks)
    query_log_sample: float = 0.0  # share of queries logged (JSON logs make them parseable)
    reuse_port: bool = False  # SO_REUSEPORT: a new process can take over without a gap
    rrl: RrlSettings = field(default_factory=RrlSettings)  # on, as `dnsd serve` runs it
    redis_url: str | None = None  # share health with other nodes through Redis
    redis_max_age_s: float = 30.0  # another node's observation counts this long
    redis_key: bytes | None = None  # the cluster key; None shares unsealed (--redis-insecure)
    redis_ca_file: str | None = None  # rediss://: the CA the server's certificate must chain to
    cluster_nodes: frozenset[str] | None = None  # who may speak on the bus; None: anyone
    answer_cache: bool = True  # dnsd.fastpath: same bytes, much less work per query
    udp_loop: str = UDP_LOOPS[0]  # "thread": a blocking socket loop per listener
    serving_loop: str = SERVING_LOOPS[0]  # that loop: compiled when built ("auto"), or pure
    first_round_wait_s: float = 10.0  # wait this long at most for the first probes before binding
    workers: int = 1  # processes answering on the listen addresses (dnsd.workers)
    key_dir: Path | None = None  # DNSSEC keys (STATE_DIR/keys); None: zones are not signed
    create_keys: bool = True  # False in a worker: it reads the keys the main process made
    worker_argv: tuple[str, ...] = ()  # a worker's `dnsd` arguments, --listen added on start
    follow_fd: int | None = None  # this is a worker: views and reloads come on this pipe
    server_file: ServerFile | None = None  # `--config FILE`: reloads read it again


class DnsServer:
    def __init__(
        self, options: ServerOptions, snapshot: Snapshot, cache: ParseCache | None = None
    ) -> None:
        self.options = options
        self.holder = SnapshotHolder(snapshot)
        # Events (dnsd.events): the main process keeps them in STATE_DIR/events.jsonl.
        main = options.follow_fd is None
        self.events = EventLog.open(options.state_dir if main else None)
        self.store = HealthStore(options.state_dir, events=self.events)
        self.store.node_name = options.node.name or "dnsd"
        self.store.set_snapshot(snapshot)
        self.bus: RedisBus | None = None
        if options.redis_url:
            # Several nodes: this one probes as its own region; the others' observations
            # arrive through Redis (dnsd.cluster).
            self.store.only_source = options.node.pop_region
            self.store.set_snapshot(snapshot)
            # The redis client only with --redis (16 MiB).
            from dnsd.cluster.bus import RedisBus
            from dnsd.cluster.connection import RedisTarget
            from dnsd.cluster.health_channel import HealthChannel

            node = options.node.name or options.node.pop_region or "dnsd"
            target = RedisTarget(options.redis_url, options.redis_ca_file)
            self.bus = RedisBus(target, node, key=options.redis_key, nodes=options.cluster_nodes)
            HealthChannel(self.bus, self.store, options.redis_max_age_s)
            if options.redis_key is None:
                log.warning(
                    "health bus WITHOUT a cluster key (--redis-insecure): whoever can write "
                    "to %s can change this node's health and overrides and, through the config "
                    "sync, rewrite its configuration files",
                    target,
                )
        self.scheduler = ProbeScheduler(self.store)
        self.rng = random.Random()
        self.caches = AnswerCaches()  # the event loop's and each UDP thread's
        self.cache = self.caches.new() if options.answer_cache else None
        self._udp_threads: list[UdpThread] = []
        self.metrics = Metrics()
        self.events.listeners.append(self.metrics.observe_event)
        self.store.on_published = self.metrics.observe_publish
        self.scheduler.on_probe = self.metrics.observe_probe
        self.admin_bound: tuple[str, int] | None = None
        self._admin_runner: web.AppRunner | None = None
        self._admin_server: asyncio.Server | None = None
        self.admin_guard: ConnectionGuard | None = None
        # Descriptors for clients, with a reserve the probes and files always keep.
        self.descriptors = share_descriptors(options.tcp_limits.max_connections)
        tcp_limits = replace(options.tcp_limits, max_connections=self.descriptors.tcp_dns)
        self.counters = NetCounters()
        self.rrl = ResponseRateLimiter(options.rrl)
        self.rrl.cookies = options.node.cookies  # a valid server cookie is never limited
        self.pool: WorkerPool | None = None
        self._reload_lock = asyncio.Lock()
        self.parse_cache = cache or ParseCache()  # what the first load parsed
        self._next_reload: asyncio.Future[ReloadResult] | None = None
        self.follower: Follower | None = None
        self.stop_requested: asyncio.Event | None = None  # set by signals, or a worker's orphaning
        # Set with stop_requested by SIGTERM/SIGINT: a config load in progress gives up
        # (read by its worker thread, hence not an asyncio.Event).
        self.loads_cancelled = threading.Event()
        self._reporting: asyncio.Task[None] | None = None
        self._key_watch: asyncio.Task[None] | None = None
        # systemd (Type=notify): the main process speaks for the service; workers stay quiet.
        self.systemd = SystemdNotifier({} if options.follow_fd is not None else None)
        # Alerts come from the main process only (workers see no events): one per change.
        hooks = options.webhooks if options.follow_fd is None else ()
        # With a server file, webhooks may come with a reload: always watch (main process).
        watch = bool(hooks) or (options.server_file is not None and options.follow_fd is None)
        self.alerts = Alerts(hooks, options.node.name or options.node.pop_region or "dnsd")
        # Failover and failback events: the active pools compared after every change.
        self.moves = ActivePoolWatch(
            self._region_states, lambda: self.holder.current, lambda: self.store.view,
            self.events,
        )  # fmt: skip
        self._watched: tuple[int, int] = (-1, -1)
        self._move_check: asyncio.TimerHandle | None = None
        if main and self.bus is not None:
            self.bus.connection_listeners.append(self._redis_event)
        if watch:
            self.events.listeners.append(self.alerts.send)
            self.metrics.register(self.alerts)
        # What each new health view sets off, in this order — one named list, not the
        # order in which modules happened to register: the failover watch compares active
        # pools; then the serials, where a zone whose transferred answers changed gets a
        # new one and a new snapshot; then the worker processes (`--workers`), which must
        # receive the snapshot with those serials (set once the pool has started).
        self.view_steps: dict[str, Callable[[HealthView], None] | None] = {
            "moves": self._watch_moves if main else None,
            "serials": None,
            "workers": None,
        }
        self.store.view_listeners.append(self._on_view)
        self._systemd_tasks: list[asyncio.Task[None]] = []
        self.bound: list[tuple[str, int]] = []
        self._udp: list[asyncio.DatagramTransport] = []
        self._tcp: list[asyncio.Server] = []
        # The event loop's UDP (`--udp-loop asyncio`) shares its cache with TCP: one thread.
        self._loop_udp_answer = self.answerer(self.cache, "udp")
        # Zone versions (serials, the IXFR journal) and NOTIFY live in the main process.
        self.versions = ZoneVersions(options.state_dir) if options.follow_fd is None else None
        self.notifier = NotifySender(self.holder)
        if self.versions is not None:
            self.holder.swap(self.versions.update(snapshot, self.store.view, time.time()))
            self.view_steps["serials"] = self._new_view
            self.versions.listeners.append(self.notifier.changed)
        # Config API writes happen in the main process, which reloads its workers.
        self._config_writer = (
            ConfigWriter(options.config_dir, self.reload, self.loads_cancelled.is_set)
            if options.follow_fd is None
            else None
        )
        self.config_sync: ConfigSync | None = None
        self.audit = AuditLog(options.state_dir)
        if self.bus is not None and self._config_writer is not None:
            from dnsd.cluster.config_channel import ConfigSync

            self.config_sync = ConfigSync(
                self.bus, self._config_writer, options.state_dir, self._config_refused,
                on_synced=self._audit_synced,
                on_state=self._config_sync_event,
            )  # fmt: skip
        self.transfers = TransferService(self.holder, self.versions, lambda: self.view)
        self.loops = ServingLoops()  # every serving loop's answers, restarts and readiness
        self._tcp_handler = TcpHandler(
            self.answerer(self.cache, "tcp"), self.counters, tcp_limits, self.transfers.answer,
            self.loops,
        )  # fmt: skip
        active = ActivePools(
            self.holder, self.store, lambda lb, now: shared_region_states(self, lb, now),
            answering_pool,
        )  # fmt: skip
        self.metrics.add_text(active.text)
        cockpit = CockpitCollector(self.holder, self.store, self.serving_loop, __version__)
        collectors = (StateCollector(self.holder, self.store), cockpit, self._tcp_handler, self.rrl)
        for collector in (*collectors, self.loops):
            self.metrics.register(collector)
        if self.bus is not None:
            self.metrics.register(self.bus)
        if options.answer_cache:
            self.metrics.register(self.caches)

    def answerer(self, cache: AnswerCache | None, transport: str) -> Answerer:
        """One query at a time (TCP, the event loop's UDP): a batch of one."""
        answer_batch = self.batch_answerer(cache, transport)

        def answer_query(wire: bytes, client: Client) -> bytes | None:
            return answer_batch([wire], [client])[0]

        return answer_query

    def batch_answerer(self, cache: AnswerCache | None, transport: str) -> BatchAnswerer:
        return self.answering(cache, transport)[0]

    def answering(
        self, cache: AnswerCache | None, transport: str
    ) -> tuple[BatchAnswerer, CacheHits | None]:
        """The answering function of one loop (a UDP thread, or the event loop's UDP or
        TCP), for a batch of queries: its own cache and metrics tally, everything bound once.
        The clock, the snapshot and the health view are read once per batch, the time taken
        is measured per batch (each query counts the batch's mean in the latency histogram),
        and the tally's updates are written out here: no call per query but the cache's.
        Second: what the compiled UDP loop needs to answer the cache's hits itself, with
        the same cache, random source and tally (None: every query takes this function)."""

        def uncached(
            wire: bytes, client: Client, snap: Snapshot, view: HealthView, rng: random.Random,
            now: float, decided: DecisionObserver,
        ) -> bytes | None:  # fmt: skip
            return resolve(Request(wire, client, snap, view, rng, now, decided))

        # The cache takes the request's parts as they are: a memo hit builds no object.
        answer = cache.answer if cache is not None else uncached
        if cache is not None:
            self.metrics.count_decisions_of(cache.lb_counts, cache.fallback_counts)
        tally = self.metrics.tally(transport)
        counts, latency, sums, dropped = tally.counts, tally.latency, tally.sums, tally.dropped
        buckets, fold_at, fold = tally.buckets, tally.fold_at, tally.fold
        decided = self.metrics.observe_decision
        holder, rng, options = self.holder, self.rng, self.options
        perf_counter, wall_clock = time.perf_counter, time.time

        def record(answered: int, queries: int, seconds: float) -> None:
            """`answered` of `queries` answered in `seconds`: the mean into the histogram."""
            if answered:
                latency[bisect_left(buckets, seconds / queries)] += answered
                sums[0] += seconds * answered / queries
            if len(counts) > fold_at:  # random names: fold into labelled totals
                fold()

        def answer_batch(
            wires: list[bytes], clients: list[Client], drawn: list[Any] | None = None
        ) -> list[bytes | None]:
            started = perf_counter()
            snap, view, now = holder.current, self.view, wall_clock()
            replies: list[bytes | None] = []
            for i, (wire, client) in enumerate(zip(wires, clients, strict=True)):
                try:
                    if drawn is not None and drawn[i] is not None:  # the compiled loop drew
                        assert cache is not None
                        reply = cache.answer(wire, client, snap, view, rng, now, decided, drawn[i])
                    else:
                        reply = answer(wire, client, snap, view, rng, now, decided)
                except Exception:  # a bug must cost one answer, never the listener
                    ERROR_LOG.log(now, logging.ERROR, "error answering a query from %s",
                                  client.address, exc_info=True)  # fmt: skip
                    reply = None
                replies.append(reply)
                if reply is None:
                    dropped[0] += 1
                    continue
                key = reply[2:60]  # flags and rcode, the counts, the question
                counts[key] = counts.get(key, 0) + 1
            record(len(replies) - replies.count(None), len(replies), perf_counter() - started)
            if options.query_log_sample:
                for client, reply in zip(clients, replies, strict=True):
                    if reply and rng.random() < options.query_log_sample:
                        log_query(client, reply)
            return replies

        hits = None
        if cache is not None and not options.query_log_sample:  # sampling sees every reply
            hits = CacheHits(
                cache, rng, tally,
                lambda: cache.prepare(holder.current, self.view, wall_clock()), record,
            )  # fmt: skip
        return answer_batch, hits

    def _watch_moves(self, view: HealthView) -> None:
        """Failover and failback events when a region's active pool moved: looked at when
        the health *states* or the config changed (RTT-only views move no failover order)."""
        key = (view.states_generation, self.holder.current.generation)
        if key == self._watched or self._move_check is not None:
            return
        self._watched = key
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a test driving the store): at once
            self.moves.check()
            return
        # A little later, once for a burst of changes (a flapping pool, a script writing
        # overrides): steering every load balancer again per change would be most of what
        # a change costs the event loop.
        self._move_check = loop.call_later(MOVE_CHECK_DELAY_S, self._check_moves)

    def _check_moves(self) -> None:
        self._move_check = None
        self._watched = (self.store.view.states_generation, self.holder.current.generation)
        self.moves.check()

    def _config_sync_event(self, state: str, reason: str | None) -> None:
        self.events.add(make(time.time(), "config_sync", reason or state, SYSTEM, state=state,
                             reason=reason))  # fmt: skip

    def _redis_event(self, up: bool) -> None:
        cause = "connected again" if up else "connection lost"
        self.events.add(make(time.time(), "redis", cause, SYSTEM, connected=up,
                             url=self.bus_status_url()))  # fmt: skip

    def bus_status_url(self) -> str:
        status = self.bus_status()
        return str(status["url"]) if status else ""

    def serving_loop(self) -> str:
        """What answers UDP: the UDP threads' loop (compiled or pure), or the event loop."""
        if self.options.udp_loop == "asyncio":
            return "asyncio"
        threads = list(self._udp_threads)
        return threads[0].loop if threads else self.options.serving_loop

    @staticmethod
    def _region_states(names: Iterable[str], snap: Snapshot, view: HealthView) -> RegionStates:
        """Per load balancer, the pool each client region gets under `snap` and `view`:
        the computation the status document and the metrics share (dnsd.admin.status)."""
        now, lbs = time.time(), snap.config.load_balancers
        states = {}
        for name in names:
            active, failed, _ = region_details_under(snap, view, lbs[name], now)
            states[name] = (active, failed)
        return states

    def _serve_serials(self, serials: dict[str, int]) -> None:
        """A worker: serve the SOA serials the main process decided."""
        self.holder.swap(with_serials(self.holder.current, serials))

    def _on_view(self, view: HealthView) -> None:
        for step in self.view_steps.values():
            if step is not None:
                step(view)

    def _new_view(self, view: HealthView) -> None:
        """Every health view: a zone whose transferred answers changed gets a new serial."""
        assert self.versions is not None
        current = self.holder.current
        updated = self.versions.update(current, view, time.time())
        if updated is not current:
            self.holder.swap(updated)

    @property
    def udp_threads(self) -> tuple[UdpThread, ...]:
        """The UDP serving threads (`--udp-loop thread`), one per listening address."""
        return tuple(self._udp_threads)

    @property
    def view(self) -> HealthView:
        """The health view to answer with: the store's, or in a worker process the one the
        main process sent last (dnsd.workers)."""
        return self.follower.view if self.follower is not None else self.store.view

    @property
    def ready(self) -> bool:
        """Config loaded, the first round of probes done (docs/health.md, docs/api.md) and every
        listener serving (a serving loop being restarted, or a dead worker, is not ready)."""
        return self.ready_to_serve and not self.loops.down()

    @property
    def ready_to_serve(self) -> bool:
        if self.follower is not None:
            return self.follower.first_view.is_set()
        return self.scheduler.first_round.is_set()

    @property
    def config_writer(self) -> ConfigWriter | None:
        return self._config_writer

    def bus_status(self) -> dict[str, Any] | None:
        return self.bus.status() if self.bus is not None else None

    async def start(self) -> None:
        self.stop_requested = asyncio.Event()
        if self.options.follow_fd is not None:
            await self._follow(self.options.follow_fd)
        else:
            await self._start_probing()
        for host, port in self.options.listen:
            self.bound.append(await self._bind(host, port))
        for host, port in self.bound:
            log.info("listening on %s port %d (udp+tcp; udp loop: %s)", host, port,
                     self.options.udp_loop)  # fmt: skip
        if self.options.admin is not None:
            await self._start_admin(*self.options.admin)
        if self.options.key_dir is not None:
            self._key_watch = asyncio.create_task(self._follow_keys(self.options.key_dir))
        if self.alerts.hooks or self.options.server_file is not None:
            self.alerts.start()
        if self.options.follow_fd is None:
            self.moves.arm()  # the starting point failovers are measured from
        if self.systemd.enabled:
            self._systemd_tasks.append(asyncio.create_task(self._tell_systemd_ready()))
            if self.systemd.watchdog_s:
                self._systemd_tasks.append(asyncio.create_task(self._watchdog()))
        if self.options.workers > 1 and self.options.follow_fd is None:
            listen = [f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.bound]
            argv = [*self.options.worker_argv, *(a for x in listen for a in ("--listen", x))]
            self.pool = WorkerPool(
                self.options.workers,
                argv,
                self.store,
                report=self._worker_report,
                retire=self._worker_retired,
                serials=self.versions.serials if self.versions is not None else dict,
                restarted=self._worker_restarted,
            )
            self.pool.start()
            self.view_steps["workers"] = self.pool.publish
            self.loops.external_down = self.pool.dead
        self._systemd_tasks.append(asyncio.create_task(self._watch_loops()))
        if self.options.follow_fd is None:  # the main process owns the overrides
            self._systemd_tasks.append(asyncio.create_task(self._expire_overrides()))

    async def _expire_overrides(self) -> None:
        """Overrides with an expiry end by themselves, also one set before a restart."""
        while True:
            with contextlib.suppress(PersistError):  # logged; the next tick tries again
                self.store.expire_overrides()
            await asyncio.sleep(OVERRIDE_EXPIRY_CHECK_S)

    def _worker_report(self, pid: int, counts: dict[str, Any]) -> None:
        self.metrics.set_worker_counts(pid, counts)
        self.loops.worker_report(pid, counts.get("loops", {}))

    def _worker_restarted(self) -> None:
        self.loops.add_restart("worker")

    def _worker_retired(self, pid: int) -> None:
        self.metrics.retire_worker(pid)
        self.loops.worker_retired(pid)

    async def _watch_loops(self) -> None:
        """systemd's STATUS names every listener that is down, and says when all serve again."""
        said: list[str] = []
        while True:
            await asyncio.sleep(LOOP_WATCH_S)
            down = self.loops.down()
            if down != said and self.ready_to_serve:
                if down:
                    self.systemd.send(f"STATUS=serving loop down: {'; '.join(down)}")
                else:
                    zones = len(self.holder.current.zones)
                    self.systemd.send(f"STATUS=serving {zones} zone(s): every loop is back")
                said = down

    async def _audit_synced(self, entry: dict[str, Any]) -> None:
        """A change set from another node, applied here or refused: in the audit trail
        with its origin node, within that node's budget (dnsd.admin.audit)."""
        if self.audit.allow(f"sync:{entry['origin_node']}", time.monotonic()):
            await asyncio.to_thread(self.audit.append, entry)

    def _config_refused(self, errors: list[str]) -> None:
        generation = self.holder.current.generation
        self.events.add(make(time.time(), "reload_failed", (errors or ["refused"])[0][:300],
                             current_actor(), generation=generation,
                             errors=errors[:20]))  # fmt: skip

    async def _start_probing(self) -> None:
        if self.config_sync is not None:
            self.config_sync.start()
        if self.bus is not None:
            await self.bus.start()
        await self.scheduler.start()
        # Answer only once every backend has been probed once (gdnsd's initial round): a
        # restarted server must not send clients to a dead backend it has not looked at yet.
        try:
            async with asyncio.timeout(self.options.first_round_wait_s):
                await self.scheduler.first_round.wait()
        except TimeoutError:
            log.warning(
                "first probe round not complete after %.0fs: serving anyway",
                self.options.first_round_wait_s,
            )

    async def _follow(self, fd: int) -> None:
        """A worker: health views and reloads come from the main process (dnsd.workers)."""
        loop = asyncio.get_running_loop()
        stop = self.stop_requested
        assert stop is not None
        self.follower = Follower(
            fd,
            on_reload=lambda _generation: loop.call_soon_threadsafe(
                lambda: asyncio.ensure_future(self.reload())
            ),
            on_gone=lambda: loop.call_soon_threadsafe(stop.set),
            on_serials=lambda serials: loop.call_soon_threadsafe(self._serve_serials, serials),
        )
        self.follower.start()
        if not await self.follower.wait_first_view(self.options.first_round_wait_s * 3):
            log.warning("no health view from the main process yet: serving anyway")
        self._reporting = asyncio.create_task(self._report_counts())

    async def _follow_keys(self, key_dir: Path) -> None:
        """DNSSEC key states change with time (a roll), key files with `dnsd keys roll`:
        every second, look for either and serve the keys as they stand then. Every process
        does this on its own; the states are a function of the time."""
        seen: dict[Path, float] = {}
        while True:
            await asyncio.sleep(KEY_CHECK_S)
            snap = self.holder.current
            if not snap.signing:
                continue
            if self.versions is not None:  # a new day is a new signed version (fresh RRSIGs)
                self._new_view(self.store.view)
            files = key_files(key_dir, snap.signing)
            now = time.time()
            due = any((k.next_change() or now + 1) <= now for k in snap.signing.values())
            if files == seen and not due:
                continue
            seen = files
            try:
                keys = await asyncio.to_thread(zone_keys, snap.config.zones, key_dir, False)
            except ConfigError as exc:
                log.error("DNSSEC keys: %s (still signing with the keys loaded before)", exc)
                continue
            current = self.holder.current
            if current.config is snap.config:  # no reload came in between
                self.holder.swap(with_keys(current, keys))
                if self.versions is not None:  # new DNSKEY states: a new signed version
                    self._new_view(self.store.view)
                for zone, zk in keys.items():
                    states = ", ".join(f"{k.role} {k.tag} {k.state(zk.at)}" for k in zk.keys)
                    log.info("DNSSEC keys of %s: %s", zone, states)

    async def _tell_systemd_ready(self) -> None:
        """READY=1 when /readyz turns 200 (the first probe round may end after binding)."""
        while not self.ready:
            await asyncio.sleep(0.05)
        zones = len(self.holder.current.zones)
        listen = " ".join(f"{h}:{p}" for h, p in self.bound)
        self.systemd.ready(f"serving {zones} zone(s) on {listen}")

    async def _watchdog(self) -> None:
        """WATCHDOG=1 from the event loop itself: if the loop stalls, the pings stop."""
        assert self.systemd.watchdog_s is not None
        while True:
            self.systemd.send("WATCHDOG=1")
            await asyncio.sleep(self.systemd.watchdog_s)

    async def _report_counts(self) -> None:
        """A worker's query counts go to the main process's /metrics, every second."""
        assert self.follower is not None
        while True:
            await asyncio.sleep(REPORT_EVERY_S)
            counts = {**self.metrics.serving_counts(), "loops": self.loops.report()}
            await asyncio.to_thread(self.follower.report, counts)

    def admin_tokens(self) -> tuple[Token, ...]:
        """The server file's tokens, and DNSD_ADMIN_TOKEN as one more `admin` token."""
        env = self.options.admin_token
        extra = (Token.from_secret("DNSD_ADMIN_TOKEN", "admin", env),) if env else ()
        return (*self.options.tokens, *extra)

    def admin_gate(self) -> TokenGate | None:
        return self._admin_runner.app[GATE] if self._admin_runner is not None else None

    async def _start_admin(self, host: str, port: int) -> None:
        self._admin_runner = web.AppRunner(
            build_app(self, self.admin_tokens(), host, self.audit),
            access_log=None,
            keepalive_timeout=ADMIN_KEEPALIVE_S,
        )
        await self._admin_runner.setup()
        factory = self._admin_runner.server
        assert factory is not None
        gate = self._admin_runner.app[GATE]  # the API's own: a reload changes both at once
        reserve = max(2, self.descriptors.admin // 8)  # places only a valid token gets
        general = max(self.descriptors.admin - reserve, 2)
        guard = ConnectionGuard(
            factory, general, ADMIN_HEADER_TIMEOUT_S, reserve=reserve,
            per_source=min(ADMIN_PER_SOURCE, general), write_timeout_s=ADMIN_WRITE_TIMEOUT_S,
            authorized=lambda secret: gate.find(secret) is not None,
            rate_per_source=ADMIN_RATE_PER_SOURCE,
        )  # fmt: skip
        self.admin_guard = guard
        loop = asyncio.get_running_loop()
        # --reuse-port: a new dnsd binds the same admin port while the old one still runs.
        self._admin_server = await loop.create_server(
            guard, host, port, reuse_address=True, reuse_port=self.options.reuse_port or None
        )
        bound = self._admin_server.sockets[0].getsockname()
        self.admin_bound = (host, bound[1])
        tokens = self.admin_tokens()
        writes = f"{len(tokens)} token(s)" if tokens else "refused (no DNSD_ADMIN_TOKEN)"
        log.info("admin API on http://%s:%d/ (writes %s)", _url_host(host), bound[1], writes)

    async def _bind(self, host: str, port: int) -> tuple[str, int]:
        """Bind TCP and UDP on the same port; with port 0, find one free for both."""
        loop = asyncio.get_running_loop()
        for _ in range(20):
            reuse_port = self.options.reuse_port or None
            tcp = await asyncio.start_server(
                self._tcp_handler, host, port, reuse_address=True, reuse_port=reuse_port
            )
            actual = tcp.sockets[0].getsockname()[1]
            try:
                udp, _ = await loop.create_datagram_endpoint(
                    lambda: UdpProtocol(self._loop_udp_answer, self.rrl),
                    local_addr=(host, actual),
                    family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                    reuse_port=reuse_port,
                )
            except OSError:
                tcp.close()
                if port:
                    raise
                continue
            self._tcp.append(tcp)
            _grow_receive_buffer(udp.get_extra_info("socket"))
            if self.options.udp_loop == "thread":
                # Hand the bound socket to a blocking loop thread instead of the event loop.
                sock = udp.get_extra_info("socket").dup()
                udp.close()
                sock.setblocking(True)
                # Each thread has its own cache and tally: nothing per query is shared.
                own_cache = self.caches.new() if self.options.answer_cache else None
                own, hits = self.answering(own_cache, "udp")
                thread = UdpThread(sock, own, self.rrl, hits, self.options.serving_loop, self.loops)
                self._udp_threads.append(thread)
                thread.start()
            else:
                self._udp.append(udp)
            return host, actual
        raise OSError(f"no free port for both UDP and TCP on {host}")

    async def reload(self) -> ReloadResult:
        """Load the config again; on any error keep serving the old snapshot.

        One reload runs at a time. Requests that arrive while one runs share the next one
        (coalesced: however many arrive, one more reload, which reads the files as they are
        then), so generations rise strictly and no older read can land after a newer one.
        Every caller gets the result of a reload that started after its request."""
        waiting = self._next_reload
        if waiting is not None:
            return await asyncio.shield(waiting)
        waiting = self._next_reload = asyncio.get_running_loop().create_future()
        async with self._reload_lock:
            self._next_reload = None  # requests from now on wait for the reload after this
            self.systemd.reloading()
            result = await self._reload_now()
            status = "reloaded" if result.ok else "reload failed, serving the old config"
            self.systemd.ready(f"{status}: generation {result.generation}")
        waiting.set_result(result)
        return result

    def _load_again(self, generation: int, geo: GeoDatabase | None) -> Snapshot:
        """A reload's loading, in a worker thread: the GeoIP database reopened when its file
        changed on disk (the location caches start afresh with it), then the config."""
        geo = reopened(geo) if geo is not None else None
        current = self.holder.current
        return load_snapshot(self.options.config_dir, generation, geo, current.node,
                             self.options.key_dir, self.options.create_keys, previous=current,
                             cache=self.parse_cache,
                             cancelled=self.loads_cancelled.is_set)  # fmt: skip

    async def _reload_now(self) -> ReloadResult:
        current = self.holder.current
        generation = current.generation + 1
        filed = None
        try:
            if self.options.server_file is not None:  # a bad server file changes nothing
                filed = self.options.server_file.read()
            # A daemon thread: a SIGTERM in the middle of a long load is not held by it.
            snapshot = await in_daemon_thread(self._load_again, generation, current.geo)
        except ConfigError as exc:
            reasons = [str(r) for r in exc.reasons]
        except LoadCancelled:
            return ReloadResult(False, current.generation, ["the server is stopping"])
        except Exception as exc:
            reasons = [f"{self.options.config_dir}: cannot load: {type(exc).__name__}"]
        else:
            if self.versions is not None:  # served with its serials from the first query on
                snapshot = self.versions.update(snapshot, self.store.view, time.time())
            elif self.follower is not None:  # a worker: the main process's serials
                snapshot = with_serials(snapshot, self.follower.serials)
            release_later(self.holder.swap(snapshot))  # freed off the loop, in slices
            # Before the new health view: a failover the new config makes names it as cause.
            self.events.add(make(time.time(), "config", current_cause("reload"), current_actor(),
                                 generation=generation,
                                 warnings=len(snapshot.warnings)))  # fmt: skip
            self.store.set_snapshot(snapshot)
            if self.follower is None:  # a worker probes nothing: its views come from the pipe
                self.scheduler.reconcile()
            self.metrics.reloads.labels("ok").inc()
            log.info("reloaded %s: generation %d", self.options.config_dir, generation)
            if self.pool is not None:
                self.pool.reloaded(generation)
            if filed is not None:
                apply_server_file(self, filed)
            restart = list(filed.restart_needed) if filed is not None else []
            return ReloadResult(True, generation, [str(w) for w in snapshot.warnings], restart)
        self.metrics.reloads.labels("failed").inc()
        self.events.add(make(time.time(), "reload_failed", reasons[0][:300] if reasons else
                             "reload failed", current_actor(), generation=current.generation,
                             errors=reasons[:20]))  # fmt: skip
        log.error("reload failed, still serving generation %d:", current.generation)
        for reason in reasons:
            log.error("  %s", reason)
        return ReloadResult(False, current.generation, reasons)

    async def stop(self) -> None:
        self.systemd.stopping()
        for task in self._systemd_tasks:
            task.cancel()
        if self._key_watch is not None:
            self._key_watch.cancel()

        if self._reporting is not None:
            self._reporting.cancel()
            if self.follower is not None:  # the last counts, so none are lost at a restart
                await asyncio.to_thread(self.follower.report, self.metrics.serving_counts())
        if self.pool is not None:
            self.view_steps["workers"] = None
            await self.pool.stop()
        if self._admin_server is not None:
            self._admin_server.close()
        if self._admin_runner is not None:
            await self._admin_runner.cleanup()
        if self._config_writer is not None:
            self._config_writer.reader.close()
        await self.scheduler.stop()
        if self.versions is not None:  # the last serials on disk before the process ends
            await asyncio.to_thread(self.versions.flush)
        await self.notifier.stop()
        if self._move_check is not None:
            self._move_check.cancel()
        await self.alerts.stop()
        await asyncio.to_thread(self.events.close)  # every event written before exit
        if self.config_sync is not None:
            await self.config_sync.stop()
        if self.bus is not None:
            await self.bus.stop()
        for udp in self._udp:
            udp.close()
        for thread in self._udp_threads:
            await asyncio.to_thread(thread.stop)
        for tcp in self._tcp:
            tcp.close()
        await self._tcp_handler.close_all()
        for tcp in self._tcp:
            await tcp.wait_closed()


OVERRIDE_EXPIRY_CHECK_S = 0.5
MOVE_CHECK_DELAY_S = 0.05  # failover/failback events: one look per burst of changes
KEY_CHECK_S = 1.0
LOOP_WATCH_S = 0.5  # how soon systemd's STATUS names a listener that is down
UDP_RECEIVE_BUFFER = 4 << 20
ADMIN_HEADER_TIMEOUT_S = 10.0  # a new admin connection sends its request headers by then
ADMIN_KEEPALIVE_S = 15.0  # an idle keep-alive admin connection is closed after this
ADMIN_WRITE_TIMEOUT_S = 5.0  # a client that reads none of its answers for this long is cut
ADMIN_PER_SOURCE = 16  # admin connections from one address (an IPv6 /64)
ADMIN_RATE_PER_SOURCE = 50.0  # requests a second from one address without a token
REPORT_EVERY_S = 1.0


def _grow_receive_buffer(sock: socket.socket) -> None:
    """A burst of queries waits in the kernel instead of being dropped: ask for 4 MiB (the
    kernel caps it at net.core.rmem_max; the default is about 208 KiB)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RECEIVE_BUFFER)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def log_query(client: Client, reply: bytes) -> None:
    from dnslib import QTYPE, RCODE, DNSRecord

    try:
        parsed = DNSRecord.parse(reply)
    except Exception:  # a sampled log line must never break serving
        return
    log.info(
        "query %s %s from %s: %s %s",
        parsed.q.qname,
        QTYPE.get(parsed.q.qtype),
        client.address,
        RCODE.get(parsed.header.rcode),
        " ".join(str(rr.rdata) for rr in parsed.rr),
        extra={
            "event": "query",
            "qname": str(parsed.q.qname),
            "qtype": QTYPE.get(parsed.q.qtype),
            "client": str(client.address),
            "transport": client.transport,
            "rcode": RCODE.get(parsed.header.rcode),
            "answer": [str(rr.rdata) for rr in parsed.rr],
        },
    )


async def serve(options: ServerOptions) -> int:
    try:
        geo = GeoDatabase(options.geoip)
    except (OSError, ValueError) as exc:
        log.error("cannot open GeoIP database %s: %s", options.geoip or "(embedded)", exc)
        return 1
    if options.follow_fd is None:  # the main process speaks for its workers
        log_geoip_database(geo, time.time(), log)  # a WARNING when it is stale
    cache = ParseCache()  # the reloads parse only the files that changed since
    try:
        snapshot = await asyncio.to_thread(
            load_snapshot, options.config_dir, 1, geo, options.node, options.key_dir,
            options.create_keys, None, cache,
        )  # fmt: skip
    except ConfigError as exc:
        for reason in exc.reasons:
            log.error("%s", reason)
        return 1
    for warning in snapshot.warnings:
        log.warning("%s", warning)
    server = DnsServer(options, snapshot, cache)
    await server.start()
    release_free_memory()  # what starting (serials, the transfer digests) freed too
    stop = server.stop_requested
    assert stop is not None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(server.reload()))

    def request_stop() -> None:
        server.loads_cancelled.set()
        stop.set()

    loop.add_signal_handler(signal.SIGTERM, request_stop)
    loop.add_signal_handler(signal.SIGINT, request_stop)
    log.info("serving %d zone(s) from %s", len(snapshot.zones), options.config_dir)
    await stop.wait()
    log.info("stopping")
    await server.stop()
    return 0
