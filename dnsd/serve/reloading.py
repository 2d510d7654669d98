"""Reloading the config (SIGHUP, the reload API, a config write): load it off the event
loop, swap the new snapshot in, run what a reload sets off, answer with the result. On
any error the old snapshot keeps serving."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from dnsd.admin.metrics import Metrics
from dnsd.config.loader import LoadCancelled, ParseCache
from dnsd.errors import ConfigError
from dnsd.events import EventLog, current_actor
from dnsd.events.record import current_cause, make
from dnsd.geo.database import GeoDatabase, reopened
from dnsd.health.store import HealthStore
from dnsd.loading import load_snapshot
from dnsd.net.sdnotify import SystemdNotifier
from dnsd.process_tools import in_daemon_thread
from dnsd.reaper import release_later
from dnsd.reload_result import ReloadResult
from dnsd.serverfile_reload import ServerFile, ServerFileRead
from dnsd.snapshot import Snapshot, SnapshotHolder

log = logging.getLogger("dnsd.server")  # one logger for every part of serving
# One thing a successful reload sets off: (the new generation, the server file as read).
ReloadStep = Callable[[int, ServerFileRead | None], None]


class Reloader:
    def __init__(
        self,
        config_dir: Path,
        key_dir: Path | None,
        create_keys: bool,
        server_file: ServerFile | None,
        holder: SnapshotHolder,
        parse_cache: ParseCache,
        cancelled: Callable[[], bool],
        with_serials: Callable[[Snapshot], Snapshot],
        store: HealthStore,
        events: EventLog,
        metrics: Metrics,
        systemd: SystemdNotifier,
        steps: dict[str, ReloadStep | None],
    ) -> None:
        self.config_dir = config_dir
        self.key_dir = key_dir
        self.create_keys = create_keys
        self.server_file = server_file  # `--config FILE`: read again at each reload
        self.holder = holder
        self.parse_cache = parse_cache  # the files unchanged since are not parsed again
        self.cancelled = cancelled  # the server is stopping: a load in progress gives up
        self.with_serials = with_serials  # served with its serials from the first query on
        self.store = store
        self.events = events
        self.metrics = metrics
        self.systemd = systemd
        self.steps = steps  # the server's ordered list, run after each successful swap
        self._lock = asyncio.Lock()
        self._next: asyncio.Future[ReloadResult] | None = None

    async def reload(self) -> ReloadResult:
        """Load the config again; on any error keep serving the old snapshot.

        One reload runs at a time. Requests that arrive while one runs share the next one
        (coalesced: however many arrive, one more reload, which reads the files as they are
        then), so generations rise strictly and no older read can land after a newer one.
        Every caller gets the result of a reload that started after its request."""
        waiting = self._next
        if waiting is not None:
            return await asyncio.shield(waiting)
        waiting = self._next = asyncio.get_running_loop().create_future()
        async with self._lock:
            self._next = None  # requests from now on wait for the reload after this
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
        return load_snapshot(
            self.config_dir,
            generation,
            geo,
            current.node,
            self.key_dir,
            self.create_keys,
            previous=current,
            cache=self.parse_cache,
            cancelled=self.cancelled,
        )

    async def _reload_now(self) -> ReloadResult:
        current = self.holder.current
        generation = current.generation + 1
        filed = None
        try:
            if self.server_file is not None:  # a bad server file changes nothing
                filed = self.server_file.read()
            # A daemon thread: a SIGTERM in the middle of a long load is not held by it.
            snapshot = await in_daemon_thread(self._load_again, generation, current.geo)
        except ConfigError as exc:
            reasons = [str(r) for r in exc.reasons]
        except LoadCancelled:
            return ReloadResult(False, current.generation, ["the server is stopping"])
        except Exception as exc:
            reasons = [f"{self.config_dir}: cannot load: {type(exc).__name__}"]
        else:
            snapshot = self.with_serials(snapshot)
            release_later(self.holder.swap(snapshot))  # freed off the loop, in slices
            # Before the new health view: a failover the new config makes names it as cause.
            self.events.add(
                make(
                    time.time(),
                    "config",
                    current_cause("reload"),
                    current_actor(),
                    generation=generation,
                    warnings=len(snapshot.warnings),
                )
            )
            self.store.set_snapshot(snapshot)
            self.metrics.reloads.labels("ok").inc()
            self.metrics.last_reload_ok.set(1)
            log.info("reloaded %s: generation %d", self.config_dir, generation)
            for step in self.steps.values():
                if step is not None:
                    step(generation, filed)
            restart = list(filed.restart_needed) if filed is not None else []
            return ReloadResult(True, generation, [str(w) for w in snapshot.warnings], restart)
        self.metrics.reloads.labels("failed").inc()
        self.metrics.last_reload_ok.set(0)
        self.events.add(
            make(
                time.time(),
                "reload_failed",
                reasons[0][:300] if reasons else "reload failed",
                current_actor(),
                generation=current.generation,
                errors=reasons[:20],
            )
        )
        log.error("reload failed, still serving generation %d:", current.generation)
        for reason in reasons:
            log.error("  %s", reason)
        return ReloadResult(False, current.generation, reasons)
