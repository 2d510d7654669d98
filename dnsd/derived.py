"""What consumers compute from an immutable object (a snapshot, a compiled zone), kept
with that object: made once per key, dropped with it, never looked up by identity in a
module-level cache. A new object (a reload, `dataclasses.replace`) starts empty."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Keys under this prefix hold what is made from a zone's configuration (and the snapshot's
# LB graph, checked by whoever reads it): a new compiled zone of the same configuration —
# new serials, a relinked load balancer — starts with them instead of making them again.
CARRIED = "carried: "


class Derived:
    __slots__ = ("_lock", "_values")

    def __init__(self) -> None:
        self._lock = threading.RLock()  # a `make` may read or take other values
        self._values: dict[str, Any] = {}

    def get(self, key: str, make: Callable[[], T]) -> T:
        """The value under `key`, made by `make` the first time (once, under a lock:
        `make` must be quick — work that grows with the config starts a thread instead)."""
        with self._lock:
            if key not in self._values:
                self._values[key] = make()
            value: T = self._values[key]
            return value

    def peek(self, key: str) -> Any:
        """The value under `key` if one was made (None when not), making nothing. Not under
        the lock: one dict read is atomic, and the serving path must not wait for a `make`."""
        return self._values.get(key)

    def built(self) -> dict[str, Any]:
        """What was made so far (a copy): what a successor object may reuse."""
        with self._lock:
            return dict(self._values)

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._values[key] = value

    def carry(self, older: Derived) -> None:
        """Take over `older`'s values under `CARRIED` keys."""
        for key, value in older.built().items():
            if key.startswith(CARRIED):
                self.put(key, value)

    def take(self, key: str) -> Any:
        """The value under `key`, removed (None when there is none)."""
        with self._lock:
            return self._values.pop(key, None)

    def __repr__(self) -> str:
        return "Derived()"
