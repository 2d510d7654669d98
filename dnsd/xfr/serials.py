"""SOA serials (pure): RFC 1982 arithmetic and the rule dnsd numbers zone versions by.

* `serial: auto` (the default): the first version is numbered with the Unix time; every
  change of the transferred content takes the previous serial + 1, or the Unix time when
  that is larger — so serials stay monotonic across restarts even without a state dir.
* An explicit serial is a floor: a change dnsd makes itself (a health change of a
  transferred answer, a config change that kept the serial) still takes previous + 1, and
  a config change that raises the serial above the served one takes it.
"""

from __future__ import annotations

from typing import Final

MASK: Final = 0xFFFFFFFF
HALF: Final = 1 << 31


def serial_gt(a: int, b: int) -> bool:
    """RFC 1982 §3.2: `a` is greater than `b` (undefined pairs, exactly half apart, are not)."""
    return a != b and ((a < b and b - a > HALF) or (a > b and a - b < HALF))


def next_serial(previous: int | None, changed: bool, floor: int | None, now: float) -> int:
    """The serial to serve, given the one served before (None: never served), whether the
    content changed since, the configured floor (None: `auto`) and the time."""
    clock = int(now) & MASK
    if previous is None:
        return floor if floor is not None else clock
    serial = previous
    if changed:
        serial = (previous + 1) & MASK
        if floor is None and serial_gt(clock, serial):
            serial = clock
    if floor is not None and serial_gt(floor, serial):
        serial = floor
    return serial
