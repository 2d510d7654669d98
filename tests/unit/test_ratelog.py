"""Log lines strangers can cause are bounded."""

from __future__ import annotations

import logging

from dnsd.ratelog import RateLimitedLog


def test_a_flood_writes_a_burst_then_one_summary_per_period(caplog) -> None:
    limited = RateLimitedLog(logging.getLogger("t.ratelog"), burst=3, period_s=10.0)
    with caplog.at_level(logging.ERROR, logger="t.ratelog"):
        for i in range(20_000):
            limited.log(1000.0 + i * 0.001, logging.ERROR, "bad query %d", i)  # 20 s of flood
        limited.log(1025.0, logging.ERROR, "after the flood")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:3] == ["bad query 0", "bad query 1", "bad query 2"]
    assert lines[3] == "9997 similar line(s) suppressed in the last 10s"
    assert lines[4:7] == ["bad query 10000", "bad query 10001", "bad query 10002"]
    assert lines[7].startswith("9997 similar line(s) suppressed") and lines[8] == "after the flood"
    assert len(lines) == 9 and limited.suppressed_total == 19_994
