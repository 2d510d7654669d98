"""The event journal: the newest `MEMORY_EVENTS` events in memory (what the status page,
`GET /api/v1/events` and `events_for` read), every event appended to
`STATE_DIR/events.jsonl` and handed to the listeners (webhooks, metrics).

The file is bounded: past `MAX_BYTES` it becomes `events.jsonl.1` (the older one goes),
so at most twice `MAX_BYTES` are kept. It is written by one writer thread in batches,
without fsync — an event costs the serving loop a queue put, never a disk wait; the
writer is flushed when the server stops. At start both files are read back (the newest
`MEMORY_EVENTS` events kept), so events survive a restart; a line that is not an event
(a torn write after a crash, a hand edit) is skipped, and one log line says how many.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from dnsd.events.record import Event

log = logging.getLogger("dnsd.events")
MAX_BYTES: Final = 4 << 20  # one file; with the rotated one at most 8 MiB on disk
MEMORY_EVENTS: Final = 10_000
FILE_NAME: Final = "events.jsonl"
# How loudly each kind is logged (one line per event, its fields as JSON log fields).
WARN_KINDS: Final = frozenset(
    {"quorum", "failover", "fail_open", "reload_failed", "redis", "config_sync"}
)
# Log record attributes an event's fields must not replace (`time` and `kind` are the
# log line's own time and the `event` field).
_RESERVED: Final = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "time",
    "kind",
}


class EventLog:
    def __init__(
        self, path: Path | None = None, memory: int = MEMORY_EVENTS, max_bytes: int = MAX_BYTES
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._events: deque[Event] = deque(maxlen=memory)
        self.added = 0  # events added since start (a cache key: the deque's length stops)
        self.listeners: list[Callable[[Event], None]] = []
        self._lines: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(cls, state_dir: Path | None, memory: int = MEMORY_EVENTS) -> EventLog:
        """The journal of a state directory, its earlier events loaded (None: memory only)."""
        journal = cls(state_dir / FILE_NAME if state_dir is not None else None, memory)
        journal.load()
        return journal

    # -- reading back ------------------------------------------------------------------------
    def load(self) -> int:
        """Read the rotated file, then the current one; the number of events loaded."""
        if self.path is None:
            return 0
        lines: deque[str] = deque(maxlen=self._events.maxlen)  # only the newest are parsed
        for path in (self.rotated, self.path):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.error("cannot read the events in %s: %s", path, exc.strerror)
                continue
            lines.extend(line for line in text.splitlines() if line.strip())
        skipped = loaded = 0
        for line in lines:
            try:
                self._events.append(Event.from_json(json.loads(line)))
                loaded += 1
            except (ValueError, KeyError, TypeError, AttributeError):
                skipped += 1
        if skipped:
            log.warning("%s: %d line(s) that are not events skipped", self.path, skipped)
        return loaded

    @property
    def rotated(self) -> Path:
        assert self.path is not None
        return self.path.with_name(self.path.name + ".1")

    # -- adding ------------------------------------------------------------------------------
    def add(self, event: Event) -> None:
        """Keep, log, persist (queued for the writer thread) and tell the listeners."""
        self._events.append(event)
        self.added += 1
        level = logging.WARNING if event.kind in WARN_KINDS else logging.INFO
        if log.isEnabledFor(level):
            regions = f" [{', '.join(event.regions)}]" if event.regions else ""
            fields = {k: v for k, v in event.to_json().items() if k not in _RESERVED}
            log.log(
                level,
                "event %s %s%s: %s (by %s)",
                event.kind,
                event.subject,
                regions,
                event.cause,
                event.actor,
                extra={"event": event.kind, **fields},
            )
        if self.path is not None:
            self._lines.put(event)  # turned into JSON by the writer thread
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_all, name="events", daemon=True)
                self._writer.start()
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # one consumer's bug must not lose the event for the others
                log.exception("event listener %r failed", listener)

    def close(self) -> None:
        """Write every queued event (blocking; at stop, or from a test)."""
        writer = self._writer
        if writer is not None:
            self._lines.put(None)
            writer.join(timeout=10)
            self._writer = None

    def _write_all(self) -> None:
        while True:
            first = self._lines.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < 1000:
                try:
                    more = self._lines.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            try:
                self._write(batch)
            except OSError as exc:
                log.error("cannot write the events to %s: %s", self.path, exc.strerror)
            if stop:
                return

    def _write(self, events: list[Event]) -> None:
        """Append a batch, rotating whenever the next line would pass `max_bytes`."""
        assert self.path is not None
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            chunk: list[bytes] = []
            for event in events:
                line = json.dumps(
                    event.to_json(), sort_keys=True, separators=(",", ":"), default=str
                )
                data = (line + "\n").encode()
                if size and size + len(data) > self.max_bytes:
                    self._append(chunk)
                    os.replace(self.path, self.rotated)
                    chunk, size = [], 0
                chunk.append(data)
                size += len(data)
            self._append(chunk)

    def _append(self, chunk: list[bytes]) -> None:
        if not chunk:
            return
        assert self.path is not None
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, b"".join(chunk))
        finally:
            os.close(fd)

    # -- queries -----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Event]:
        return iter(list(self._events))

    def __len__(self) -> int:
        return len(self._events)

    def recent(self, count: int) -> list[Event]:
        """The newest `count` events, newest first (the status document)."""
        out: list[Event] = []
        for event in reversed(self._events):
            if len(out) >= count:
                break
            out.append(event)
        return out

    def select(
        self,
        since: float | None = None,
        until: float | None = None,
        kinds: Collection[str] = (),
        lb: str | None = None,
        limit: int = 1000,
    ) -> tuple[list[Event], bool]:
        """The newest `limit` events matching, oldest first, and whether more matched."""
        out: list[Event] = []
        more = False
        for event in reversed(self._events):
            if since is not None and event.time < since:
                break  # appended in time order (a clock step back aside): older ones follow
            if until is not None and event.time > until:
                continue
            if (kinds and event.kind not in kinds) or (lb is not None and event.lb != lb):
                continue
            if len(out) >= limit:
                more = True
                break
            out.append(event)
        out.reverse()
        return out, more

    def events_for(
        self,
        lb: str,
        since: float,
        until: float,
        pools: Collection[str] = (),
        lbs: Collection[str] = (),
    ) -> list[dict[str, Any]]:
        return events_for(
            self.select(since, until, limit=len(self._events) or 1)[0], lb, since, until, pools, lbs
        )


def events_for(
    events: Iterable[Event],
    lb: str,
    since: float,
    until: float,
    pools: Collection[str] = (),
    lbs: Collection[str] = (),
) -> list[dict[str, Any]]:
    """The events of one load balancer from `since` to `until` (epoch seconds, both
    included), oldest first, as JSON objects — what its timeline draws: its own events
    (failover, failback, fail open, override) and those of `lbs` (the load balancers it
    nests), the health and override events of `pools` (the pools it can answer from) and
    their backends, and config changes. Pure: the caller passes the events
    (`EventLog.events_for` passes its own)."""
    wanted, nested = set(pools), {lb, *lbs}
    return [
        e.to_json()
        for e in sorted(events, key=lambda e: e.time)
        if since <= e.time <= until
        and (
            e.lb in nested
            or (e.lb is None and e.pool in wanted)
            or (e.kind in ("config", "reload_failed") and e.lb is None)
        )
    ]
