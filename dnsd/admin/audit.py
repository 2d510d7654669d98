"""The audit trail of admin writes: STATE_DIR/audit.jsonl, one JSON object per write
through the API (time, token, source, method, route, before, after, status), appended
and fsynced before the answer goes out; rotated to audit.jsonl.1 past `MAX_BYTES`
(interfaces.md "Additions"). Without a state directory it is kept in memory only."""

from __future__ import annotations

import json
import os
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

MAX_BYTES: Final = 10 << 20
MAX_RETURNED: Final = 1000  # entries one GET returns at most (the newest)


class AuditLog:
    def __init__(self, state_dir: Path | None) -> None:
        self.path = state_dir / "audit.jsonl" if state_dir else None
        self._memory: deque[dict[str, Any]] = deque(maxlen=MAX_RETURNED)

    def append(self, entry: dict[str, Any]) -> None:
        """Write one entry durably (blocking: call it in a worker thread)."""
        line = json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n"
        self._memory.append(entry)
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size + len(line) > MAX_BYTES:
            os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def since(self, when: datetime | None) -> list[dict[str, Any]]:
        """Entries at or after `when` (all when None), oldest first, the newest at most
        `MAX_RETURNED` of them."""
        entries: list[dict[str, Any]] = list(self._memory)
        if self.path is not None:
            entries = []
            for path in (self.path.with_name(self.path.name + ".1"), self.path):
                if path.exists():
                    with open(path, encoding="utf-8") as handle:
                        entries += [json.loads(line) for line in handle if line.strip()]
        if when is not None:
            stamp = when.timestamp()
            entries = [e for e in entries if datetime.fromisoformat(e["time"]).timestamp() >= stamp]
        return entries[-MAX_RETURNED:]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
