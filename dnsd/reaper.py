"""Letting go of a big snapshot without stalling the event loop.

CPython frees an object graph in the thread that drops its last reference, in one go:
deallocating a dict of 100,000 zone nodes is a single C call that holds the GIL for its
whole run (tens of ms), so a reload whose old snapshot dies on the event loop stalls DNS
and the admin API for that long at its very end. `release_later` hands the old object to a
background thread that waits until it holds the last reference, takes the elements of the
big containers inside it into a list of its own (so dropping the containers only counts
references down), and then frees that list a slice at a time: between slices the
interpreter may switch threads, so the loop waits a GIL switch interval (5 ms) at most.
Nothing is mutated: objects still referenced elsewhere (an unchanged zone a new snapshot
shares) merely lose one reference.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import queue
import sys
import threading
import time
import types
from typing import Any

log = logging.getLogger(__name__)

BIG = 512  # a container with more elements than this is taken apart
SLICE = 1024  # elements freed between two chances for the loop to run
WAIT_S = 120.0  # how long the reaper waits for the other holders to let go
POLL_S = 0.05
MAX_VISITS = 100_000  # small objects walked at most: the walk stays short and local
_CONTAINERS = (dict, list, tuple, set, frozenset)
# Not walked into: they lead out of the snapshot (to modules, code, the whole heap).
_LEAVES = (
    str,
    bytes,
    int,
    float,
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.CodeType,
    logging.Logger,
)

_queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
_started = threading.Lock()
_thread: threading.Thread | None = None


def release_later(obj: Any) -> None:
    """Give `obj` to the reaper; the caller drops its own references as usual."""
    global _thread
    with _started:
        if _thread is None:
            _thread = threading.Thread(target=_reap, name="reaper", daemon=True)
            _thread.start()
    _queue.put((time.monotonic() + WAIT_S, obj))
    del obj


def free_in_steps(*containers: list[Any] | dict[Any, Any] | set[Any]) -> None:
    """Empty big containers one item at a time, in the calling thread. Dropping one whole
    frees every object in it in one C call, which holds the GIL (every thread of a
    serving process) for as long: ~100 ms for the intermediate tables of a
    100,000-record zone file. For what a worker thread builds and throws away itself;
    what the event loop lets go goes to `release_later`."""
    for container in containers:
        if isinstance(container, dict):
            while container:
                container.popitem()
        else:
            while container:
                container.pop()


def pending() -> int:
    """Objects handed over and not yet freed (for tests and the curious)."""
    return _queue.qsize()


def _reap() -> None:
    waiting: list[tuple[float, Any]] = []
    while True:
        with contextlib.suppress(queue.Empty):
            waiting.append(_queue.get(timeout=POLL_S if waiting else None))
        still: list[tuple[float, Any]] = []
        while waiting:
            deadline, obj = waiting.pop()
            # Only ours: the name `obj` and getrefcount's own argument.
            if sys.getrefcount(obj) > 2 and time.monotonic() < deadline:
                still.append((deadline, obj))
                del obj
                continue
            try:
                parts = _elements_of_big_containers(obj)
            except Exception:  # never let the reaper die: the object is freed anyway
                log.exception("taking an old snapshot apart")
                parts = []
            del obj  # the containers go now, cheaply: `parts` holds every element
            while parts:
                del parts[-SLICE:]
        waiting = still


def _elements_of_big_containers(root: Any) -> list[Any]:
    """The elements of every big container reachable from `root` through small objects
    (dataclass fields, mapping proxies, small tuples); a big container's elements are held,
    not walked: freeing one element is short."""
    parts: list[Any] = []
    seen: set[int] = set()
    stack = [root]
    visits = 0
    while stack and visits < MAX_VISITS:
        visits += 1
        for ref in gc.get_referents(stack.pop()):
            if id(ref) in seen or isinstance(ref, _LEAVES):
                continue
            seen.add(id(ref))
            if isinstance(ref, _CONTAINERS) and len(ref) > BIG:
                parts.extend(ref.values() if isinstance(ref, dict) else ref)
                if isinstance(ref, dict):
                    parts.extend(ref.keys())
            else:
                stack.append(ref)
    return parts
