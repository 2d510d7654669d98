"""Ramps in progress kept in STATE_DIR/ramps.json (docs/steering.md, ramps), so a restart in
the middle of a ramp goes on with it instead of moving the rest of the answers at once.
Written atomically by a thread of its own when the ramps change; read once at start; a
file that is too large or not dnsd's is logged and ignored (no ramp is then in force)."""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from dnsd.atomic_files import write_file
from dnsd.health.view import RampStart, TrickleRamp

log = logging.getLogger("dnsd.ramps")
FILE: Final = "ramps.json"
MAX_FILE_BYTES: Final = 1 << 20
MAX_ENTRIES: Final = 10_000
MAX_NAME: Final = 255
Key = tuple[str, str]


def to_json(ramps: Mapping[Key, RampStart], trickles: Mapping[str, TrickleRamp]) -> str:
    rows = [
        {"lb": lb, "region": region, "since": r.start_s, "from": r.from_ref, "to": r.to_ref}
        for (lb, region), r in sorted(ramps.items())
    ]
    ratios = [
        {"lb": lb, "since": r.start_s, "from": r.ratio_from, "to": r.ratio_to}
        for lb, r in sorted(trickles.items())
    ]
    data = {"version": 1, "ramps": rows, "trickles": ratios}
    return json.dumps(data, separators=(",", ":")) + "\n"


def from_json(text: str) -> dict[Key, RampStart]:
    """The ramps of a file written by `to_json`; ValueError for anything else."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError("not a ramps file of version 1")
    rows = data.get("ramps")
    if not isinstance(rows, list) or len(rows) > MAX_ENTRIES:
        raise ValueError(f"ramps: a list of at most {MAX_ENTRIES} entries expected")
    out: dict[Key, RampStart] = {}
    for row in rows:
        if not isinstance(row, dict):
            raise ValueError("a ramp is not an object")
        names = [row.get(k) for k in ("lb", "region", "from", "to")]
        if not all(isinstance(n, str) and len(n) <= MAX_NAME for n in names):
            raise ValueError(f"bad names in {row!r:.200}")
        since = row.get("since")
        if not isinstance(since, int | float) or not math.isfinite(since):
            raise ValueError(f"bad since {since!r}")
        lb, region, old, new = names
        out[(str(lb), str(region))] = RampStart(float(since), str(old), str(new))
    return out


def trickles_from_json(text: str) -> dict[str, TrickleRamp]:
    """The trickle ratio's ramps of a file written by `to_json`; ValueError for others."""
    rows = json.loads(text).get("trickles", [])
    if not isinstance(rows, list) or len(rows) > MAX_ENTRIES:
        raise ValueError(f"trickles: a list of at most {MAX_ENTRIES} entries expected")
    out: dict[str, TrickleRamp] = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("lb"), str):
            raise ValueError(f"bad trickle ramp {row!r:.200}")
        values = [row.get(k) for k in ("since", "from", "to")]
        numbers = [float(v) for v in values if isinstance(v, int | float)]
        if len(row["lb"]) > MAX_NAME or len(numbers) != 3 or not all(map(math.isfinite, numbers)):
            raise ValueError(f"bad trickle ramp {row!r:.200}")
        since, low, high = numbers
        lb = row["lb"]
        out[lb] = TrickleRamp(since, low, high)
    return out


def read(path: Path) -> tuple[dict[Key, RampStart], dict[str, TrickleRamp]]:
    """The file's ramps (none when it is absent or unreadable, which is logged)."""
    if not path.exists():
        return {}, {}
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
        return from_json(text), trickles_from_json(text)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        log.warning("%s: ignored (%s): no ramp in progress is resumed", path, exc)
        return {}, {}


class Writer:
    """The latest ramps to the file, off the event loop (a burst is one write of the last)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: str | None = None
        self._lock, self._writing = threading.Lock(), threading.Lock()
        self.writes = 0

    def later(self, text: str) -> None:
        with self._lock:
            self._pending = text
        threading.Thread(target=self.flush, name="ramps", daemon=True).start()

    def flush(self) -> None:
        with self._writing:  # one write at a time: an older table never lands last
            with self._lock:
                text, self._pending = self._pending, None
            if text is None:
                return
            try:
                write_file(self.path, text)
                self.writes += 1
            except OSError as exc:  # a full disk: the ramps stay in memory
                log.warning("%s: not written: %s", self.path, exc)
