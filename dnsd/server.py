"""Composition root: construct the services (dnsd.serve) from named parts and start and stop
them in one named order each (dnsd.cli.serve runs it: the first load, the signals)."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dnsd.admin.audit import AuditLog
from dnsd.admin.gate import Token, TokenGate
from dnsd.admin.metrics import Metrics
from dnsd.admin.webhooks import Alerts
from dnsd.config.loader import ParseCache
from dnsd.events import EventLog
from dnsd.fastpath import AnswerCaches
from dnsd.health.scheduler import ProbeScheduler
from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView
from dnsd.net.counters import NetCounters
from dnsd.net.descriptors import share_descriptors
from dnsd.net.dnstap import DnstapWriter
from dnsd.net.proxy_protocol import ProxyGate
from dnsd.net.rrl import ResponseRateLimiter
from dnsd.net.sdnotify import SystemdNotifier
from dnsd.net.supervisor import ServingLoops
from dnsd.net.tcp import TcpHandler
from dnsd.net.udp_thread import BatchAnswerer, CacheHits, UdpThread
from dnsd.provision.writer import ConfigWriter
from dnsd.reload_result import ReloadResult
from dnsd.serve import metric_sources
from dnsd.serve import systemd as systemd_steps
from dnsd.serve.admin_listener import AdminListener
from dnsd.serve.answering import Answering
from dnsd.serve.cluster_news import ClusterNews, open_bus
from dnsd.serve.failover_watch import FailoverWatch
from dnsd.serve.following import Following
from dnsd.serve.key_watch import follow_keys
from dnsd.serve.last_good import LastGood
from dnsd.serve.listeners import DnsListeners
from dnsd.serve.loop_watch import watch_loops
from dnsd.serve.options import ServerOptions
from dnsd.serve.override_expiry import expire_overrides
from dnsd.serve.pool_load import PoolLoad
from dnsd.serve.probing import start_probing
from dnsd.serve.ramps import RampWatch
from dnsd.serve.reloading import Reloader, ReloadStep
from dnsd.serve.serials import Serials
from dnsd.serve.steps import BackgroundLoops, Step, run_steps
from dnsd.serve.update_relay import UpdateRelay
from dnsd.serve.updates import UpdateService
from dnsd.serve.worker_pool import start_workers
from dnsd.serverfile_reload import ServerFileRead
from dnsd.serverfile_reload import apply as apply_server_file
from dnsd.snapshot import Snapshot, SnapshotHolder
from dnsd.workers import Follower, WorkerPool
from dnsd.xfr.notify import NotifySender
from dnsd.xfr.service import TransferService
from dnsd.xfr.versions import ZoneVersions

if TYPE_CHECKING:
    from dnsd.cluster.bus import RedisBus
    from dnsd.cluster.config_channel import ConfigSync

__all__ = ["DnsServer", "ServerOptions"]  # ServerOptions: from dnsd.serve.options

log = logging.getLogger("dnsd.server")


class DnsServer:
    def __init__(
        self, options: ServerOptions, snapshot: Snapshot, cache: ParseCache | None = None
    ) -> None:
        """Built from named parts, each a method below, in the order they need each other."""
        self.options = options
        self.main = options.follow_fd is None  # not a `--workers` worker process
        self._state(snapshot)
        self._observers()
        self._answering()
        self._changes(snapshot, cache)
        self._listeners()
        self._orders()

    def _state(self, snapshot: Snapshot) -> None:
        """The snapshot, the events, the health store and what it remembers, the Redis bus."""
        options, main = self.options, self.main
        self.holder = SnapshotHolder(snapshot)
        # Events (dnsd.events): the main process keeps them in STATE_DIR/events.jsonl.
        self.events = EventLog.open(options.state_dir if main else None)
        self.store = HealthStore(options.state_dir, events=self.events)
        self.store.node_name = options.node.name or "dnsd"
        self.store.set_snapshot(snapshot)
        # when_all_down: last_good (docs/steering.md): remembered in STATE_DIR, read back first
        self.last_good = LastGood(self.holder, self.store, options.state_dir if main else None)
        self.last_good.load()
        self.bus: RedisBus | None = None
        if options.redis_url:
            # Several nodes: this one probes as its own region; the others' observations
            # arrive through Redis (dnsd.cluster).
            self.store.only_source = options.node.pop_region
            self.store.set_snapshot(snapshot)
            self.bus = open_bus(
                options.redis_url,
                options.redis_ca_file,
                options.node.name or options.node.pop_region or "dnsd",
                options.redis_key,
                options.cluster_nodes,
                options.redis_max_age_s,
                self.store,
            )
        self.scheduler = ProbeScheduler(self.store)
        self.stop_requested: asyncio.Event | None = None  # set by signals, or a worker's orphaning
        # Set with stop_requested by SIGTERM/SIGINT: a config load in progress gives up
        # (read by its worker thread, hence not an asyncio.Event).
        self.loads_cancelled = threading.Event()
        self.background = BackgroundLoops()  # the loops that run until the server stops

    def _observers(self) -> None:
        """Metrics, alerts, audit, systemd, and what follows each new health view."""
        options, main = self.options, self.main
        self.metrics = Metrics()
        self.events.listeners.append(self.metrics.observe_event)
        self.store.on_published = self.metrics.observe_publish
        self.scheduler.on_probe = self.metrics.observe_probe
        # systemd (Type=notify): the main process speaks for the service; workers stay quiet.
        self.systemd = SystemdNotifier({} if not main else None)
        # Alerts come from the main process only (workers see no events): one per change.
        self.hooks = options.webhooks if main else ()
        # With a server file, webhooks may come with a reload: always watch (main process).
        self.alerting = bool(self.hooks) or (options.server_file is not None and main)
        self.alerts = Alerts(self.hooks, options.node.name or options.node.pop_region or "dnsd")
        # Failover and failback events: the active pools compared after every change.
        self.failover = FailoverWatch(self.holder, self.store, self.events)
        self.moves = self.failover.moves
        self.audit = AuditLog(options.state_dir)
        if self.alerting:
            self.events.listeners.append(self.alerts.send)
            self.metrics.register(self.alerts)
        # Ramps (docs/steering.md): kept in STATE_DIR; a ramp in progress before a restart goes on.
        state_dir = options.state_dir if main else None
        self.ramps = RampWatch(self.holder, self.store, self.events, state_dir=state_dir)
        if main:
            self.metrics.register(self.ramps)
            self.ramps.load()
        # Capacity waterfall (docs/steering.md): answers per pool, the share full pools take.
        self.pool_load = PoolLoad(self.holder, self.store, self._lb_answers, self._to_workers)
        if main:
            self.metrics.register(self.pool_load)
        # What each new health view sets off, in this order — one named list, not the
        # order in which modules happened to register: ramps first (the view the later
        # steps see carries them); the failover watch compares active pools; then the
        # serials, where a zone whose transferred answers changed gets a new one and a new
        # snapshot; then the worker processes (`--workers`), which must receive the
        # snapshot with those serials (both set later: by _changes and _start_workers).
        self.view_steps: dict[str, Callable[[HealthView], None] | None] = {
            "ramps": self.ramps.on_view if main else None,
            "last good": self.last_good.on_view if main else None,
            "moves": self.failover.on_view if main else None,
            "serials": None,
            "workers": None,
        }
        self.store.view_listeners.append(self._on_view)

    def _answering(self) -> None:
        """The answer caches, rate limiting, dnstap and the serving loops' answering functions."""
        options = self.options
        self.rng = random.Random()
        self.caches = AnswerCaches()  # the event loop's and each UDP thread's
        self.cache = self.caches.new() if options.answer_cache else None
        self.counters = NetCounters()
        self.rrl = ResponseRateLimiter(options.rrl)
        self.rrl.cookies = options.node.cookies  # a valid server cookie is never limited
        # dnstap: the serving loops queue each query for its writer thread.
        self.tap = DnstapWriter(options.dnstap) if options.dnstap.enabled else None
        if self.tap is not None:
            self.metrics.register(self.tap)
        # One answering function per serving loop, each with its own tally.
        self.answers = Answering(
            self.holder,
            lambda: self.view,
            self.metrics,
            self.rng,
            options.query_log_sample,
            self.tap,
        )
        self.answerer, self.batch_answerer = self.answers.answerer, self.answers.batch_answerer
        self.answering = self.answers.answering

    def _changes(self, snapshot: Snapshot, cache: ParseCache | None) -> None:
        """Serials, NOTIFY, reloads, the config writer and the changes shared between nodes."""
        options, main = self.options, self.main
        self.pool: WorkerPool | None = None
        self.follower: Follower | None = None
        self.parse_cache = cache or ParseCache()  # what the first load parsed
        # Zone versions (serials, the IXFR journal) and NOTIFY live in the main process.
        self.versions = ZoneVersions(options.state_dir) if main else None
        self.serials = Serials(self.holder, self.store, self.versions, lambda: self.follower)
        self.notifier = NotifySender(self.holder)
        self.metrics.register(self.notifier)
        if self.versions is not None:
            self.holder.swap(self.serials.stamp(snapshot))
            self.view_steps["serials"] = self.serials.on_view
            self.versions.listeners.append(self.notifier.changed)
        # What a successful reload sets off once the new snapshot serves, in this order:
        # the probes follow the new config (the main process; a worker's views come from
        # its pipe), the workers reload (set once the pool has started: they must receive
        # the new serials first), then the server file's tokens and webhooks take effect.
        self.reload_steps: dict[str, ReloadStep | None] = {
            "probes": (lambda _generation, _filed: self.scheduler.reconcile()) if main else None,
            "workers": None,
            "server file": self._apply_server_file,
        }
        self.reloader = Reloader(
            options.config_dir,
            options.key_dir,
            options.create_keys,
            options.server_file,
            self.holder,
            self.parse_cache,
            self.loads_cancelled.is_set,
            self.serials.stamp,
            self.store,
            self.events,
            self.metrics,
            self.systemd,
            self.reload_steps,
        )
        # Config API writes happen in the main process, which reloads its workers.
        self._config_writer = None
        if main:  # the reloads' parse cache: a check reuses it
            self._config_writer = ConfigWriter(
                options.config_dir, self.reload, self.loads_cancelled.is_set, self.parse_cache
            )
        self.config_sync: ConfigSync | None = None
        if self.bus is not None and self._config_writer is not None:  # the main process
            news = ClusterNews(self.bus, self.events, self.audit, self.holder)
            self.bus.connection_listeners.append(news.connection)
            self.config_sync = news.config_sync(self._config_writer, options.state_dir)
        self.transfers = TransferService(
            self.holder, self.versions, lambda: self.view, self.metrics.observe_transfer
        )

    def _listeners(self) -> None:
        """The DNS listeners (UDP, TCP, transfers, UPDATE), the admin listener, a worker's pipe."""
        options = self.options
        # Descriptors for clients, with a reserve the probes and files always keep.
        self.descriptors = share_descriptors(options.tcp_limits.max_connections)
        tcp_limits = replace(options.tcp_limits, max_connections=self.descriptors.tcp_dns)
        self.loops = ServingLoops()  # every serving loop's answers, restarts and readiness
        # The event loop's UDP (`--udp-loop asyncio`) shares its cache with TCP: one thread.
        loop_udp_answer = self.answerer(self.cache, "udp")
        proxy = ProxyGate(options.proxy_protocol_from) if options.proxy_protocol_from else None
        tcp_handler = TcpHandler(
            self.answerer(self.cache, "tcp"),
            self.counters,
            tcp_limits,
            self.transfers.answer,
            self.loops,
            proxy=proxy,
            tapped=self.tap is not None,
        )
        self.listeners = DnsListeners(
            tcp_handler,
            loop_udp_answer,
            self._thread_answering,
            self.rrl,
            self.loops,
            options.udp_loop,
            options.serving_loop,
            options.reuse_port,
            proxy,
            self.tap is not None,
        )
        # RFC 2136 UPDATEs: applied by the config writer, so in the main process only; a
        # worker passes the ones it receives up its pipe and answers with the reply.
        self.updates: UpdateService | None = None
        self.update_relay: UpdateRelay | None = None
        if self._config_writer is not None:
            self.updates = UpdateService(self.holder, self._config_writer)
            tcp_handler.updates = self.updates.answer
            self.listeners.updates = self.updates.submit
            self.metrics.register(self.updates)
        else:
            self.update_relay = UpdateRelay()
            tcp_handler.updates = self.update_relay.answer
            self.listeners.updates = self.update_relay.submit
        if proxy is not None:
            self.metrics.register(proxy)
        self.admin = AdminListener(
            self, self.admin_tokens, self.audit, self.descriptors.admin, options.reuse_port
        )
        fd = options.follow_fd  # a worker's pipe to the main process
        self.following = None
        if fd is not None:
            assert self.update_relay is not None
            self.following = Following(fd, self.metrics, self.loops, self.update_relay)
        caches = self.caches if options.answer_cache else None
        metric_sources.register(
            self, self.serving_loop, tcp_handler, self.rrl, self.loops, self.bus, caches
        )

    def _orders(self) -> None:
        """The order the parts start and stop in."""
        options, main = self.options, self.main
        # Started in this order: a first health view (the first probe round, or a worker's
        # pipe) before any port answers and before the failover watch measures from it; the
        # DNS ports bound before what names them (systemd's READY=1, the workers' --listen:
        # port 0 made real); the rest in the order dnsd has always started in.
        loops, admin = self.background, options.admin  # loops: cancelled by a stop step
        tap = self.tap
        self.start_steps: dict[str, Step | None] = {
            "health": self._start_probing if main else self._follow,
            "dnstap": (lambda: asyncio.to_thread(tap.start)) if tap is not None else None,
            "dns listeners": lambda: self.listeners.bind_all(options.listen),
            "admin listener": (lambda: self.admin.start(*admin)) if admin is not None else None,
            "key watch": loops.starting(self._follow_keys) if options.key_dir is not None else None,
            "alerts": self.alerts.start if self.hooks or options.server_file is not None else None,
            "failover watch": self.failover.arm if main else None,
            "systemd": self._start_systemd if self.systemd.enabled else None,
            "workers": self._start_workers if options.workers > 1 and main else None,
            "loop watch": loops.starting(self._watch_loops),
            "override expiry": loops.starting(expire_overrides, self.store) if main else None,
            "pool load": loops.starting(self.pool_load.run) if main else None,
        }
        # Stopped in this order: systemd hears STOPPING=1 first; a worker sends its last
        # counts; the workers stop before what they report to; the last serials and events
        # reach the disk; the DNS listeners close last, so queries are answered to the end.
        writer = self._config_writer
        self.stop_steps: dict[str, Step | None] = {
            "systemd": self.systemd.stopping,
            "background loops": loops.cancel,
            "counts": self.following.stop if self.following is not None else None,
            "workers": self._stop_workers,
            "admin listener": self.admin.close,
            "config writer": writer.reader.close if writer is not None else None,
            "probes": self.scheduler.stop,
            "serials": self.serials.flush,  # the last serials on disk before the process ends
            "notifies": self.notifier.stop,
            "failover watch": self.failover.stop,
            "alerts": self.alerts.stop,
            "events": lambda: asyncio.to_thread(self.events.close),  # every event written
            "last good": lambda: asyncio.to_thread(self.last_good.flush),
            "config sync": self.config_sync.stop if self.config_sync is not None else None,
            "bus": self.bus.stop if self.bus is not None else None,
            "dns listeners": self.listeners.close,
            "dnstap": (lambda: asyncio.to_thread(tap.stop)) if tap is not None else None,
        }

    def _thread_answering(self) -> tuple[BatchAnswerer, CacheHits | None]:
        """A new UDP thread's: its own cache and tally, nothing per query shared."""
        return self.answering(self.caches.new() if self.options.answer_cache else None, "udp")

    def serving_loop(self) -> str:
        """What answers UDP: the UDP threads' loop (compiled or pure), or the event loop."""
        if self.options.udp_loop == "asyncio":
            return "asyncio"
        threads = list(self.listeners.udp_threads)
        return threads[0].loop if threads else self.options.serving_loop

    def _on_view(self, view: HealthView) -> None:
        for step in self.view_steps.values():
            if step is not None:  # the latest view: a step (ramps) may have set a newer one
                step(self.store.view if self.store.view.generation > view.generation else view)

    def _lb_answers(self) -> dict[tuple[str, str, str], int]:
        """Answers so far per (load balancer, pool, region), every process's."""
        return self.metrics.decision_totals()[0]

    def _to_workers(self, view: HealthView) -> None:
        """A view set outside a publication (the capacity waterfall's shares) to the workers."""
        step = self.view_steps.get("workers")
        if step is not None:
            step(view)

    def _apply_server_file(self, _generation: int, filed: ServerFileRead | None) -> None:
        if filed is not None:
            apply_server_file(self, filed)

    @property
    def udp_threads(self) -> tuple[UdpThread, ...]:
        """The UDP serving threads (`--udp-loop thread`), one per listening address."""
        return tuple(self.listeners.udp_threads)

    @property
    def bound(self) -> list[tuple[str, int]]:
        """The DNS listen addresses, with the ports bound (port 0 made real)."""
        return self.listeners.bound

    @property
    def admin_bound(self) -> tuple[str, int] | None:
        return self.admin.bound

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

    def admin_tokens(self) -> tuple[Token, ...]:
        """The server file's tokens, and DNSD_ADMIN_TOKEN as one more `admin` token."""
        env = self.options.admin_token
        extra = (Token.from_secret("DNSD_ADMIN_TOKEN", "admin", env),) if env else ()
        return (*self.options.tokens, *extra)

    def admin_gate(self) -> TokenGate | None:
        return self.admin.gate()

    async def reload(self) -> ReloadResult:
        """Load the config again; on any error keep serving the old snapshot (coalesced:
        one reload at a time, dnsd.serve.reloading)."""
        return await self.reloader.reload()

    async def start(self) -> None:
        self.stop_requested = asyncio.Event()
        await run_steps(self.start_steps)

    async def stop(self) -> None:
        await run_steps(self.stop_steps)

    async def _start_probing(self) -> None:
        await start_probing(
            self.scheduler, self.bus, self.config_sync, self.options.first_round_wait_s
        )

    async def _follow(self) -> None:
        """A worker: health views and reloads come from the main process (dnsd.workers)."""
        assert self.following is not None and self.stop_requested is not None
        self.follower = await self.following.start(
            self.reload,
            self.stop_requested,
            self.serials.serve,
            self.options.first_round_wait_s * 3,
        )

    def _follow_keys(self) -> Awaitable[None]:
        assert self.options.key_dir is not None
        renew = self.serials.renew if self.versions is not None else None  # signed versions
        return follow_keys(self.options.key_dir, self.holder, renew)

    def _watch_loops(self) -> Awaitable[None]:
        return watch_loops(self.loops, self.systemd, lambda: self.ready_to_serve, self.holder)

    def _start_systemd(self) -> None:
        self.background.start(
            systemd_steps.tell_ready(self.systemd, lambda: self.ready, self.holder, self.bound)
        )
        if self.systemd.watchdog_s:
            self.background.start(systemd_steps.watchdog(self.systemd))

    def _start_workers(self) -> None:
        serials = self.versions.serials if self.versions is not None else dict
        updates = self.updates.answer if self.updates is not None else None
        self.pool = start_workers(
            self.options.workers,
            self.options.worker_argv,
            self.bound,
            self.store,
            serials,
            self.metrics,
            self.loops,
            updates,
        )
        pool = self.pool  # what a view and a reload set off from now on
        self.view_steps["workers"] = pool.publish
        self.reload_steps["workers"] = lambda generation, _filed: pool.reloaded(generation)

    async def _stop_workers(self) -> None:
        if self.pool is not None:
            self.view_steps["workers"] = None
            await self.pool.stop()
