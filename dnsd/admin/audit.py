"""The audit trail: STATE_DIR/audit.jsonl, one JSON object per admin write — applied or
refused — and per config change applied from another node through Redis (time, token,
source, method, route, before, after, status; `error` for a refusal, `origin_node` for a
synced change), appended and fsynced before the answer goes out.

It cannot be erased by writing a lot: past `MAX_BYTES` the file is rotated to
audit.jsonl.1 … audit.jsonl.`KEEP` (the oldest goes), and each token — all requests
without a valid token together, each origin node — may write at most `RATE_PER_S`
entries a second (a burst of `BURST`). A write over that budget is refused (429) before
anything changes and is not written line by line: it is counted, and the count lands in
one `{"kind": "audit_suppressed", "token", "count", "first", "last"}` line within a
second or two. Without a state directory the trail is kept in memory only.

A full (or read-only) state disk cannot make an applied write go unrecorded: a write that
changes something first reserves room for its entry (`reserve`: the file's blocks are
allocated ahead with fallocate, so nothing else written to the disk meanwhile can take
them) and is refused with 503, unapplied, when the room cannot be had; its entry then
lands in the room it reserved. An entry of a write that changed nothing (a refusal) that
cannot be written goes to the log instead (`append_or_log`): the refusal stands.
"""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

MAX_BYTES: Final = 10 << 20  # one file
KEEP: Final = 9  # rotated files kept beside audit.jsonl: 100 MiB of history in all
RATE_PER_S: Final = 20.0  # entries one token (or all unauthenticated refusals) may write a second
BURST: Final = 300.0  # a script may do a few hundred writes at once
MAX_RETURNED: Final = 1000  # entries one GET returns at most (the newest)
UNAUTHENTICATED: Final = "-"  # the budget every request without a valid token shares
SLACK: Final = 4096  # room reserved beyond an entry's measured size (time, status, error)
LOGGED_CHARS: Final = 2000  # of an entry that could not be written, in its log line
FALLOC_FL_KEEP_SIZE: Final = 1  # allocate beyond the end of the file, its size unchanged

log = logging.getLogger("dnsd.admin")


class AuditUnavailable(OSError):
    """The trail cannot take the entry of a write: the write must not be applied."""


@dataclass(slots=True)
class _Budget:
    tokens: float
    at: float
    suppressed: int = 0
    first: str = ""
    last: str = ""


class AuditLog:
    def __init__(self, state_dir: Path | None) -> None:
        self.path = state_dir / "audit.jsonl" if state_dir else None
        self._memory: deque[dict[str, Any]] = deque(maxlen=MAX_RETURNED)
        self._budgets: dict[str, _Budget] = {}
        self._lock = threading.Lock()  # appends come from worker threads
        self._reserved = 0  # bytes reserved past the end of the file and not yet written
        self._unlogged = 0  # entries not written and not logged (a bounded log), since last
        self._logged_at = float("-inf")
        self._logged = 0

    # -- budgets (event loop) ----------------------------------------------------------------
    def allow(self, key: str, now: float) -> bool:
        """Take one entry from `key`'s budget; False (and counted) when it has none."""
        budget = self._budgets.get(key)
        if budget is None:
            if len(self._budgets) > 10_000:  # bounded: forget the full, quiet ones
                self._budgets = {k: b for k, b in self._budgets.items() if b.suppressed}
            budget = self._budgets[key] = _Budget(BURST, now)
        budget.tokens = min(BURST, budget.tokens + (now - budget.at) * RATE_PER_S)
        budget.at = now
        if budget.tokens >= 1.0:
            budget.tokens -= 1.0
            return True
        stamp = now_iso()
        budget.first = budget.first or stamp
        budget.last = stamp
        budget.suppressed += 1
        return False

    def pending_suppressed(self) -> list[dict[str, Any]]:
        """The `audit_suppressed` lines due, their counts reset (call it about once a
        second and append what it returns)."""
        lines = []
        for key, budget in self._budgets.items():
            if budget.suppressed:
                lines.append(
                    {
                        "time": now_iso(),
                        "kind": "audit_suppressed",
                        "token": key,
                        "count": budget.suppressed,
                        "first": budget.first,
                        "last": budget.last,
                    }
                )
                budget.suppressed, budget.first, budget.last = 0, "", ""
        return lines

    # -- the file (worker thread) ------------------------------------------------------------
    def reserve(self, size: int) -> int:
        """Make sure an entry of up to `size` bytes can be written later whatever else
        fills the disk meanwhile; return the bytes reserved, to pass to `append`.
        AuditUnavailable when the room cannot be had (blocking: a worker thread)."""
        if self.path is None:
            return 0
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if not self._reserved and self._size() + size > MAX_BYTES:
                    self._rotate()  # a reservation is never carried over to another file
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    _allocate(fd, os.fstat(fd).st_size + self._reserved, size)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise AuditUnavailable(
                    exc.errno or errno.EIO,
                    f"the audit trail {self.path} cannot take the entry ({_reason(exc)})",
                ) from None
            self._reserved += size
        return size

    def release(self, reserved: int) -> None:
        """Give back room `reserve` set aside for an entry that will not be written."""
        with self._lock:
            self._reserved = max(0, self._reserved - reserved)

    def append(self, entry: dict[str, Any], reserved: int = 0) -> None:
        """Write one entry durably (blocking: call it in a worker thread). `reserved`: the
        room `reserve` set aside for it (released here, written or not); without it the
        entry's own room is allocated first, never taken from other writes' reservations."""
        line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode()
        with self._lock:
            self._memory.append(entry)
            if self.path is None:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if not self._reserved and self._size() + len(line) > MAX_BYTES:
                    self._rotate()
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    end = os.fstat(fd).st_size
                    if len(line) > reserved:  # beyond every room reserved: allocate it first
                        _allocate(fd, end + self._reserved, len(line))
                    os.write(fd, line)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            finally:
                self._reserved = max(0, self._reserved - reserved)

    def append_or_log(self, entry: dict[str, Any], reserved: int = 0) -> bool:
        """`append`; when the trail cannot take it, the entry goes to the log (at most 10
        lines a minute, then a count: a stranger's refusals write a bounded amount)."""
        try:
            self.append(entry, reserved)
        except OSError as exc:
            text = json.dumps(entry, sort_keys=True, default=str)[:LOGGED_CHARS]
            with self._lock:
                now = time.monotonic()
                if now - self._logged_at >= 60.0:
                    if self._unlogged:
                        log.error("%d more audit entries not written (not logged)", self._unlogged)
                    self._logged_at, self._logged, self._unlogged = now, 0, 0
                if self._logged < 10:
                    self._logged += 1
                    log.error(
                        "audit entry not written to %s (%s): %s", self.path, _reason(exc), text
                    )
                else:
                    self._unlogged += 1
            return False
        return True

    def _size(self) -> int:
        assert self.path is not None
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _rotate(self) -> None:
        assert self.path is not None
        for n in range(KEEP - 1, 0, -1):
            older = self.rotated(n)
            if older.exists():
                os.replace(older, self.rotated(n + 1))
        os.replace(self.path, self.rotated(1))

    def rotated(self, n: int) -> Path:
        assert self.path is not None
        return self.path.with_name(f"{self.path.name}.{n}")

    def since(self, when: datetime | None) -> list[dict[str, Any]]:
        """Entries at or after `when` (all when None), oldest first, the newest at most
        `MAX_RETURNED` of them (files are read newest first, only as far as needed)."""
        stamp = when.timestamp() if when is not None else None

        def wanted(entry: dict[str, Any]) -> bool:
            return stamp is None or datetime.fromisoformat(entry["time"]).timestamp() >= stamp

        if self.path is None:
            return [e for e in self._memory if wanted(e)][-MAX_RETURNED:]
        newest_first: list[dict[str, Any]] = []
        for path in (self.path, *(self.rotated(n) for n in range(1, KEEP + 1))):
            if not path.exists():
                continue
            with open(path, encoding="utf-8") as handle:
                entries = [json.loads(line) for line in handle if line.strip()]
            newest_first += [e for e in reversed(entries) if wanted(e)]
            if len(newest_first) >= MAX_RETURNED or (entries and not wanted(entries[0])):
                break
        return list(reversed(newest_first[:MAX_RETURNED]))


def entry_size(*parts: Any) -> int:
    """The room to reserve for an entry holding these parts (before, after, ...)."""
    return sum(len(json.dumps(p, separators=(",", ":"), default=str)) for p in parts) + SLACK


def _allocate(fd: int, offset: int, size: int) -> None:
    """Allocate `size` bytes of the file from `offset` without changing its size: later
    appends up to there cannot fail for want of space. Where fallocate is not supported,
    the free space is checked instead (the best that can be done there)."""
    result = _FALLOCATE(fd, FALLOC_FL_KEEP_SIZE, offset, size) if _FALLOCATE else -1
    if result == 0:
        return
    failed = ctypes.get_errno() if _FALLOCATE else errno.EOPNOTSUPP
    if failed not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        raise OSError(failed, os.strerror(failed))
    stats = os.fstatvfs(fd)
    if stats.f_bavail * stats.f_frsize < size:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _load_fallocate() -> Any:
    try:
        function = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):  # not glibc/Linux: the free-space check alone
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


_FALLOCATE = _load_fallocate()


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
