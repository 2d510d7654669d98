"""`dnsd serve --workers N`: N processes answer on the same address (SO_REUSEPORT); one
of them — the main process — probes, keeps overrides, serves the admin API and hands each
health view and each reload to the others.

The kernel spreads queries over the processes by source address and port. The main
process answers too; it starts N - 1 workers once it is ready (first probe round done,
listeners bound, so port 0 is already a real port) with its own command line plus
`--follow-fd FD`, a pipe. On that pipe it sends every view it publishes (plain values,
pickled: the pipe only ever joins a parent to the child it started) and a reload
notice after each successful reload. A worker probes nothing, takes its views from the
pipe, binds only after the first one, reloads its config from the same directory when
told, and stops when the pipe closes (the main process is gone). A worker that dies is
started again (at most once a second).

Limits: each process has its own answer cache and query metrics; `/metrics` of the main
process counts the main process's queries only (health metrics are the same everywhere).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView, from_plain, to_plain

log = logging.getLogger("dnsd.workers")
HEADER = struct.Struct("!I")
RESTART_PAUSE_S = 1.0


def _send(fd: int, message: tuple[str, Any]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


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
    """One worker process and the thread that feeds its pipe (never blocks the loop)."""

    def __init__(self, index: int, argv: list[str]) -> None:
        self.index = index
        read_end, self._write_end = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dnsd", *argv, "--follow-fd", str(read_end)],
            pass_fds=(read_end,),
        )
        os.close(read_end)
        self._outbox: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._feed, name=f"dnsd worker {index}", daemon=True)
        self._thread.start()

    def send(self, kind: str, payload: Any) -> None:
        self._outbox.put((kind, payload))

    def _feed(self) -> None:
        while (message := self._outbox.get()) is not None:
            try:
                _send(self._write_end, message)
            except OSError:  # the worker is gone; the pool starts another
                break
        with contextlib.suppress(OSError):
            os.close(self._write_end)

    def stop(self, timeout: float = 5.0) -> None:
        self._outbox.put(None)  # closing the pipe tells the worker to stop
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._thread.join(timeout)


class WorkerPool:
    """The main process's side: start the workers, feed them views and reloads."""

    def __init__(self, count: int, argv: list[str], store: HealthStore) -> None:
        self.count = count
        self.argv = argv
        self.store = store
        self.workers: list[_Worker] = []
        self._generation = 0
        self._watch: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.workers = [self._start(i) for i in range(1, self.count)]
        self.store.view_listeners.append(self.publish)
        self._watch = asyncio.get_running_loop().create_task(self._restart_dead())
        log.info("started %d worker process(es): %s", len(self.workers),
                 " ".join(str(w.process.pid) for w in self.workers))  # fmt: skip

    def _start(self, index: int) -> _Worker:
        worker = _Worker(index, self.argv)
        worker.send("view", to_plain(self.store.view))
        return worker

    def publish(self, view: HealthView) -> None:
        plain = to_plain(view)
        for worker in self.workers:
            worker.send("view", plain)

    def reloaded(self, generation: int) -> None:
        for worker in self.workers:
            worker.send("reload", generation)

    async def _restart_dead(self) -> None:
        while True:
            await asyncio.sleep(RESTART_PAUSE_S)
            for i, worker in enumerate(self.workers):
                if worker.process.poll() is not None:
                    log.error("worker %d (pid %d) exited with %s: starting it again",
                              worker.index, worker.process.pid, worker.process.returncode)  # fmt: skip
                    await asyncio.to_thread(worker.stop, 1.0)
                    self.workers[i] = self._start(worker.index)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        with contextlib.suppress(ValueError):
            self.store.view_listeners.remove(self.publish)
        await asyncio.gather(*(asyncio.to_thread(w.stop) for w in self.workers))
        self.workers = []


class Follower:
    """A worker's side: views and reload notices from the main process's pipe."""

    def __init__(self, fd: int, store: HealthStore, on_reload: Callable[[int], object],
                 on_gone: Callable[[], object]) -> None:  # fmt: skip
        self.fd = fd
        self.store = store
        store.external_views = True
        self.first_view = threading.Event()
        self._on_reload = on_reload
        self._on_gone = on_gone
        self._thread = threading.Thread(target=self._read, name="dnsd follower", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _read(self) -> None:
        while True:
            header = _read_exactly(self.fd, HEADER.size)
            body = _read_exactly(self.fd, HEADER.unpack(header)[0]) if header else None
            if body is None:
                log.info("the main process is gone: stopping")
                self._on_gone()
                return
            kind, payload = pickle.loads(body)
            if kind == "view":
                self.store.view = from_plain(payload)  # one reference swap: readers see either
                self.first_view.set()
            elif kind == "reload":
                self._on_reload(payload)

    async def wait_first_view(self, timeout: float) -> bool:
        started = time.monotonic()
        while not self.first_view.is_set():
            if time.monotonic() - started > timeout:
                return False
            await asyncio.sleep(0.01)
        return True


__all__ = ["Follower", "WorkerPool"]
