"""EWMA of probe round-trip times (docs/steering.md, dynamic): ewma = a·sample + (1 − a)·ewma.

The first sample starts the average. Example with a = 0.3: samples 100, 200, 50 give
100, 0.3·200 + 0.7·100 = 130, 0.3·50 + 0.7·130 = 106.
"""

from __future__ import annotations

from dnsd.health.view import RttSample


def update(previous: RttSample | None, sample_ms: float, alpha: float, at: float) -> RttSample:
    if previous is None:
        return RttSample(sample_ms, 1, at)
    ewma = alpha * sample_ms + (1.0 - alpha) * previous.ewma_ms
    return RttSample(ewma, previous.samples + 1, at)
