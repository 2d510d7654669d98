"""Process mechanics the configuration loader needs, kept out of the pure `dnsd.config`
package (tests/test_layering.py): a call on a thread with a chosen stack size, and a pause
of the cyclic garbage collector, and giving freed memory back after a load."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import ctypes.util
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, Final, TypeVar

T = TypeVar("T")
_STACK_LOCK = threading.Lock()  # threading.stack_size() is process-wide
_GC_LOCK = threading.Lock()
_gc_pauses = 0


async def in_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """`await asyncio.to_thread(fn, *args)`, but on a daemon thread of its own: a stopping
    process does not wait for it (the default executor's threads are joined at exit, so a
    config load of minutes would hold a SIGTERM for as long). The context is copied, as
    asyncio.to_thread does."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return  # the awaiting task was cancelled
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def run() -> None:
        outcome: tuple[bool, Any]
        try:
            outcome = (True, context.run(fn, *args))
        except BaseException as exc:  # handed to the awaiting task
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, name=getattr(fn, "__name__", "load"), daemon=True).start()
    return await future


def call_with_stack(stack_bytes: int, fn: Callable[[], T]) -> T:
    """fn() on a new thread whose stack is `stack_bytes` (at least 1 MiB); its exception
    is raised here."""
    result: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            result.append((True, fn()))
        except BaseException as exc:  # handed to the caller's thread
            result.append((False, exc))

    with _STACK_LOCK:
        previous = threading.stack_size(max(stack_bytes, 1 << 20))
        try:
            thread = threading.Thread(target=run, name="deep-stack")
            thread.start()
        finally:
            threading.stack_size(previous)
    thread.join()
    ok, value = result[0]
    if not ok:
        raise value
    return value


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block: a big configuration makes millions of
    objects and every collection pass would walk them all again (measured: a load takes
    about twice as long). Collection resumes when the last pause ends."""
    global _gc_pauses
    with _GC_LOCK:
        _gc_pauses += 1
        if _gc_pauses == 1:
            gc.disable()
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pauses -= 1
            if _gc_pauses == 0:
                gc.enable()


@contextmanager
def loading() -> Iterator[None]:
    """A config load: no cyclic collection during it, and what exists when it ends is
    frozen (gc.freeze) before collection resumes. A collection cannot be interrupted and
    holds the GIL: one pass over a 100,000-record configuration takes longer than the
    50 ms a reload may hold up DNS and the admin API, and the cyclic collector would
    otherwise walk it again and again. Frozen objects are still freed by reference
    counting when a later snapshot replaces them (the configuration holds no cycles).
    Meanwhile the interpreter hands the GIL on every LOAD_SWITCH_S, not every 5 ms: an
    admin request waits for the GIL a dozen times, each time up to one interval behind
    the loading thread (measured: 49 ms per request at 5 ms, under a 100,000-record
    load)."""
    with gc_paused(), switching_often():
        yield
        gc.freeze()


LOAD_SWITCH_S = 0.001
_switch_wanted: list[float] = []  # the intervals asked for by the work under way
_usual_switch_s = sys.getswitchinterval()


@contextmanager
def switching_often(interval_s: float = LOAD_SWITCH_S) -> Iterator[None]:
    """While long pure-Python work runs beside the serving loops (a load, a burst of
    UPDATEs): the GIL handed on every `interval_s`, not every 5 ms. Overlapping holders:
    the shortest interval asked for; the usual one back when the last ends."""
    start_switching_often(interval_s)
    try:
        yield
    finally:
        stop_switching_often(interval_s)


def start_switching_often(interval_s: float = LOAD_SWITCH_S) -> None:
    """switching_often() for work that does not sit in one block: each call needs its
    stop_switching_often() with the same interval."""
    global _usual_switch_s
    with _GC_LOCK:
        if not _switch_wanted:
            _usual_switch_s = sys.getswitchinterval()
        _switch_wanted.append(interval_s)
        sys.setswitchinterval(min([_usual_switch_s, *_switch_wanted]))


def stop_switching_often(interval_s: float = LOAD_SWITCH_S) -> None:
    with _GC_LOCK:
        _switch_wanted.remove(interval_s)
        sys.setswitchinterval(min([_usual_switch_s, *_switch_wanted]))


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim): a big load
    frees its parse trees between objects that stay, and without this the served process
    keeps that memory as its resident size (measured: 14 MiB of 200 on the 10k-LB config).
    Elsewhere (no glibc) nothing is done."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


# glibc's mallopt parameter for the size from which a block gets a mapping of its own.
M_MMAP_THRESHOLD: Final = -3
BIG_BLOCK_BYTES: Final = 128 * 1024  # glibc's own starting threshold


def keep_big_blocks_apart() -> None:
    """Give every block of 128 KiB or more (a big dict's table, a zone file's text) a
    mapping of its own, handed back when freed. glibc's default raises that threshold to
    the size of each such block freed, and then serves later ones from the heap, where a
    load leaves them scattered among objects that stay: measured, 13 MiB of 137 serving
    100,000 records. Call it before any thread starts; without glibc nothing is done."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, BIG_BLOCK_BYTES)


@cache
def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018  # glibc's, not another C library's
        return libc
    except (OSError, AttributeError):
        return None
