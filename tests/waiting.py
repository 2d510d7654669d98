"""Waiting for something real (a server's answer, a log line, a file) in one place.

`until(check, timeout, what)` polls `check` until it is truthy and returns how long that
took; past `timeout` it fails saying what it waited for and what `check` gave last. The
tests' polling sleeps live here, not in every file. Timers the code decides by are not
waited for: tests advance a tests/fake_clock.FakeClock instead."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
POLL_S = 0.02


def until(check: Callable[[], Any], timeout: float = 10.0, what: object = "") -> float:
    """Seconds until `check()` was truthy; AssertionError after `timeout`. `what` (or a
    callable giving it) says what was awaited, in the failure."""
    started = time.monotonic()
    while True:
        last = check()
        if last:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            said = what() if callable(what) else what
            raise AssertionError(f"not within {timeout} s: {said or check} (last: {last!r})")
        time.sleep(POLL_S)


async def until_async(check: Callable[[], Any], timeout: float = 10.0, what: object = "") -> float:
    """`until` inside an event loop: the loop keeps running while it waits."""
    started = time.monotonic()
    while True:
        last = check()
        if last:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            said = what() if callable(what) else what
            raise AssertionError(f"not within {timeout} s: {said or check} (last: {last!r})")
        await asyncio.sleep(POLL_S / 2)


def stays(check: Callable[[], Any], seconds: float, what: object = "") -> None:
    """`check()` stays truthy for `seconds` of real time (nothing more arrives, nothing
    breaks): for what only real time can show."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), what() if callable(what) else (what or check)
        time.sleep(POLL_S)
    assert check(), what() if callable(what) else (what or check)


async def stays_async(check: Callable[[], Any], seconds: float, what: object = "") -> None:
    """`stays` inside an event loop: the loop keeps running while it watches."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), what() if callable(what) else (what or check)
        await asyncio.sleep(POLL_S / 2)
    assert check(), what() if callable(what) else (what or check)


def real_time_passes(seconds: float, why: str) -> None:
    """Let `seconds` of real time pass, for tests that measure real time (a load held for
    a while, a peer's own timer in another process): `why` says which."""
    assert why
    time.sleep(seconds)


def got(get: Callable[[], T], timeout: float = 10.0, what: object = "") -> T:
    """The first truthy value `get()` gives; AssertionError after `timeout`."""
    box: list[T] = []

    def check() -> bool:
        box[:] = [get()]
        return bool(box[0])

    until(check, timeout, what)
    return box[0]
