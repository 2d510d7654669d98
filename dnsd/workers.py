"""`dnsd serve --workers N`: N processes answer on the same address (SO_REUSEPORT); one
of them — the main process — probes, keeps overrides, serves the admin API and hands each
health view and each reload to the others.

The kernel spreads queries over the processes by source address and port. The main
process answers too; it starts N - 1 workers once it is ready (first probe round done,
listeners bound, so port 0 is already a real port) with its own command line plus
`--follow-fd FD`, one end of a socket pair. On it the main process sends every view it
publishes (plain values, pickled: the pair only ever joins a parent to the child it
started) and a reload notice after each successful reload; the worker sends back its
query, latency and decision counts every second, which the main process's `/metrics`
adds to its own. A worker probes nothing, takes its views from the pair, binds only
after the first one, reloads its config from the same directory when told, and stops when
the pair closes (the main process is gone). A worker that dies is started again (at most
once a second); what it had reported stays counted.

RFC 2136 UPDATEs are applied by the config writer, which only the main process has: a
worker sends each UPDATE it receives up its pair (`update`: an id, the wire, the client's
address and transport) and the main process answers it there (`update-reply`: the id and
the signed reply) once applied, as if the UPDATE had come to it. So an UPDATE is applied
once, whichever process the kernel hands it to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import queue
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView, from_plain, to_plain

log = logging.getLogger("dnsd.workers")
HEADER = struct.Struct("!I")
RESTART_PAUSE_S = 1.0
# The main process's UPDATE service (dnsd.serve.updates) for an UPDATE a worker passed up:
# (the wire, the client's address, its transport) → the reply once applied.
Updates = Callable[[bytes, str, Literal["udp", "tcp"]], Awaitable[bytes]]
# An UPDATE a worker passes up: its id (the worker's), the wire, the client's address and
# transport (plain values: only these cross the pair).
UpdateUp = tuple[int, bytes, str, Literal["udp", "tcp"]]


def _send(fd: int, message: tuple[str, Any]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _receive(fd: int) -> tuple[str, Any] | None:
    """The next message, or None when the other side has gone."""
    header = _read_exactly(fd, HEADER.size)
    body = _read_exactly(fd, HEADER.unpack(header)[0]) if header else None
    return None if body is None else pickle.loads(body)


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, need = [], size
    while need:
        chunk = os.read(fd, need)
        if not chunk:
            return None
        chunks.append(chunk)
        need -= len(chunk)
    return b"".join(chunks)


class _Worker:
    """One worker process, the thread that feeds it (never blocks the loop) and the thread
    that takes its reports. One socket pair carries both directions."""

    def __init__(
        self,
        index: int,
        argv: list[str],
        on_report: Callable[[int, Any], object],
        on_update: Callable[[_Worker, UpdateUp], object] = lambda _w, _u: None,
    ) -> None:
        self.index = index
        self._on_update = on_update
        ours, theirs = socket.socketpair()
        self._socket = ours
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dnsd", *argv, "--follow-fd", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        self._on_report = on_report
        self._outbox: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._feeder = threading.Thread(target=self._feed, name=f"dnsd worker {index}", daemon=True)
        self._feeder.start()
        self._reader = threading.Thread(
            target=self._read, name=f"dnsd worker {index} reports", daemon=True
        )
        self._reader.start()

    def send(self, kind: str, payload: Any) -> None:
        self._outbox.put((kind, payload))

    def _feed(self) -> None:
        while (message := self._outbox.get()) is not None:
            try:
                _send(self._socket.fileno(), message)
            except OSError:  # the worker is gone; the pool starts another
                break
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)  # the worker reads the end: it stops

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while (message := _receive(self._socket.fileno())) is not None:
                kind, payload = message
                if kind == "counts":
                    self._on_report(self.process.pid, payload)
                elif kind == "update":
                    self._on_update(self, payload)

    def stop(self, timeout: float = 5.0) -> None:
        self._outbox.put(None)  # closing the connection tells the worker to stop
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._feeder.join(timeout)
        self._reader.join(timeout)
        self._socket.close()


class WorkerPool:
    """The main process's side: start the workers, feed them views and reloads."""

    def __init__(
        self,
        count: int,
        argv: list[str],
        store: HealthStore,
        report: Callable[[int, dict[str, Any]], None],
        retire: Callable[[int], None],
        serials: Callable[[], dict[str, int]] = dict,
        restarted: Callable[[], None] = lambda: None,
        updates: Updates | None = None,
    ) -> None:
        """`report(pid, counts)` is told each worker's latest serving counts; `retire(pid)`
        that a worker is gone (its last counts stay in the totals); `serials()` gives the
        SOA serials the main process serves (dnsd.xfr.versions), sent when they change;
        `updates` applies and answers the UPDATEs the workers pass up."""
        self.updates = updates
        self._loop: asyncio.AbstractEventLoop | None = None
        self._update_tasks: set[asyncio.Task[None]] = set()
        self.serials = serials
        self.restarted = restarted  # counted as dnsd_serving_loop_restarts_total{loop="worker"}
        self._sent_serials: dict[str, int] = {}
        self.count = count
        self.argv = argv
        self.store = store
        self.report = report
        self.retire = retire
        self.workers: list[_Worker] = []
        self._generation = 0
        self._watch: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.workers = [self._start(i) for i in range(1, self.count)]
        self._watch = asyncio.get_running_loop().create_task(self._restart_dead())
        log.info(
            "started %d worker process(es): %s",
            len(self.workers),
            " ".join(str(w.process.pid) for w in self.workers),
        )

    def _start(self, index: int) -> _Worker:
        worker = _Worker(index, self.argv, self.report, self._update_from)
        worker.send("serials", self.serials())
        worker.send("view", to_plain(self.store.view))
        return worker

    def _update_from(self, worker: _Worker, update: UpdateUp) -> None:
        """From a worker's reader thread: the UPDATE is applied on the event loop, like
        one this process received, and its reply goes back down the same pair."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._apply_update, worker, update)

    def _apply_update(self, worker: _Worker, update: UpdateUp) -> None:
        ident, wire, address, transport = update
        updates = self.updates

        async def run() -> None:
            if updates is not None:  # else the worker gives up on it (dnsd.serve.update_relay)
                worker.send("update-reply", (ident, await updates(wire, address, transport)))

        task = asyncio.get_running_loop().create_task(run())
        self._update_tasks.add(task)
        task.add_done_callback(self._update_tasks.discard)

    def publish(self, view: HealthView) -> None:
        plain = to_plain(view)
        serials = self.serials()
        for worker in self.workers:
            if serials != self._sent_serials:  # before the view: answers match the serial
                worker.send("serials", serials)
            worker.send("view", plain)
        self._sent_serials = serials

    def reloaded(self, generation: int) -> None:
        serials = self.serials()
        for worker in self.workers:
            worker.send("serials", serials)  # the reloaded zones' serials come first
            worker.send("reload", generation)
        self._sent_serials = serials

    def dead(self) -> list[str]:
        """Worker processes that exited and are not started again yet (not ready)."""
        return [
            f"worker {w.index} (pid {w.process.pid}) exited with {w.process.returncode}"
            for w in self.workers
            if w.process.poll() is not None
        ]

    async def _restart_dead(self) -> None:
        while True:
            await asyncio.sleep(RESTART_PAUSE_S)
            for i, worker in enumerate(self.workers):
                if worker.process.poll() is not None:
                    log.error(
                        "worker %d (pid %d) exited with %s: starting it again",
                        worker.index,
                        worker.process.pid,
                        worker.process.returncode,
                    )
                    await asyncio.to_thread(worker.stop, 1.0)
                    self.retire(worker.process.pid)
                    self.workers[i] = self._start(worker.index)
                    self.restarted()

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        await asyncio.gather(*(asyncio.to_thread(w.stop) for w in self.workers))
        for worker in self.workers:
            self.retire(worker.process.pid)
        self.workers = []


class Follower:
    """A worker's side: views and reload notices from the main process's pipe."""

    def __init__(
        self,
        fd: int,
        on_reload: Callable[[int], object],
        on_gone: Callable[[], object],
        on_serials: Callable[[dict[str, int]], object] = lambda _s: None,
        on_update_reply: Callable[[int, bytes], object] = lambda _i, _r: None,
    ) -> None:
        self.fd = fd
        self._on_update_reply = on_update_reply
        self.serials: dict[str, int] = {}  # the SOA serials the main process serves
        self._on_serials = on_serials
        self.view = HealthView()  # this worker's view source: the main process's latest
        self.first_view = threading.Event()
        self._write_lock = threading.Lock()
        self._on_reload = on_reload
        self._on_gone = on_gone
        self._thread = threading.Thread(target=self._read, name="dnsd follower", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _read(self) -> None:
        while (message := _receive(self.fd)) is not None:
            kind, payload = message
            if kind == "view":
                self.view = from_plain(payload)  # one reference swap: readers see either
                self.first_view.set()
            elif kind == "serials":
                self.serials = payload
                self._on_serials(payload)
            elif kind == "reload":
                self._on_reload(payload)
            elif kind == "update-reply":
                self._on_update_reply(*payload)
        log.info("the main process is gone: stopping")
        self._on_gone()

    def report(self, counts: dict[str, Any]) -> None:
        """Send this worker's serving counts to the main process (its /metrics adds them)."""
        with self._write_lock, contextlib.suppress(OSError):  # one whole frame at a time
            _send(self.fd, ("counts", counts))

    def pass_update(self, update: UpdateUp) -> None:
        """Send an UPDATE to the main process, which answers it with `update-reply`."""
        with self._write_lock:  # one whole frame at a time
            _send(self.fd, ("update", update))

    async def wait_first_view(self, timeout: float) -> bool:
        started = time.monotonic()
        while not self.first_view.is_set():
            if time.monotonic() - started > timeout:
                return False
            await asyncio.sleep(0.01)
        return True


__all__ = ["Follower", "WorkerPool"]
