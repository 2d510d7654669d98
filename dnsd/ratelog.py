"""Log lines that strangers can cause, at a bounded rate.

Anything a packet or a message from outside can trigger (a SERVFAIL, a malformed health
bus message) is logged through a `RateLimitedLog`: at most `burst` lines per `period_s`,
then one line saying how many were suppressed. So a flood writes a bounded amount of log
whatever it sends. The caller passes the time (pure: no clock here).
"""

from __future__ import annotations

import logging
from typing import Any


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, burst: int = 10, period_s: float = 60.0) -> None:
        self.logger = logger
        self.burst = burst
        self.period_s = period_s
        self._window_start = float("-inf")
        self._sent = 0
        self.suppressed = 0  # in the current window
        self.suppressed_total = 0

    def log(self, now: float, level: int, msg: str, *args: Any, exc_info: bool = False) -> None:
        if now - self._window_start >= self.period_s:
            if self.suppressed:
                self.logger.log(
                    level,
                    "%d similar line(s) suppressed in the last %.0fs",
                    self.suppressed,
                    now - self._window_start,
                )
            self._window_start, self._sent, self.suppressed = now, 0, 0
        if self._sent < self.burst:
            self._sent += 1
            self.logger.log(level, msg, *args, exc_info=exc_info)
        else:
            self.suppressed += 1
            self.suppressed_total += 1
