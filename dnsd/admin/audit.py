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
"""

from __future__ import annotations

import json
import os
import threading
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
                lines.append({
                    "time": now_iso(), "kind": "audit_suppressed", "token": key,
                    "count": budget.suppressed, "first": budget.first, "last": budget.last,
                })  # fmt: skip
                budget.suppressed, budget.first, budget.last = 0, "", ""
        return lines

    # -- the file (worker thread) ------------------------------------------------------------
    def append(self, entry: dict[str, Any]) -> None:
        """Write one entry durably (blocking: call it in a worker thread)."""
        line = json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n"
        with self._lock:
            self._memory.append(entry)
            if self.path is None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size + len(line) > MAX_BYTES:
                self._rotate()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)

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


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
