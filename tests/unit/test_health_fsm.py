"""The health state machine and EWMA, pure (docs/health.md, docs/steering.md, dynamic)."""

from __future__ import annotations

import pytest

from dnsd.health.ewma import update
from dnsd.health.fsm import ProbeResult, SourceState, on_result


def run(results: str, healthy: int = 2, unhealthy: int = 3) -> list[str]:
    """Feed 'ssff…' (success/failure) and return the state after each result."""
    state, out = SourceState(), []
    for i, ch in enumerate(results):
        state, _ = on_result(state, ProbeResult(ch == "s", float(i)), healthy, unhealthy)
        out.append(state.state)
    return out


@pytest.mark.parametrize(
    ("results", "states"),
    [
        ("s", ["healthy"]),  # the first result decides directly
        ("f", ["unhealthy"]),
        ("sfff", ["healthy", "healthy", "healthy", "unhealthy"]),  # exactly 3 failures
        ("sffsfff", ["healthy"] * 6 + ["unhealthy"]),  # a success resets the count
        ("fss", ["unhealthy", "unhealthy", "healthy"]),  # exactly 2 successes
        ("fsfss", ["unhealthy"] * 4 + ["healthy"]),
    ],
)
def test_thresholds(results: str, states: list[str]) -> None:
    assert run(results) == states


def test_transitions_carry_reason_and_time() -> None:
    state, t = on_result(SourceState(), ProbeResult(True, 1.0, 5.0), 2, 2)
    assert t is not None and (t.old, t.new, t.at) == ("unknown", "healthy", 1.0)
    assert "first probe" in t.reason
    state, t = on_result(state, ProbeResult(False, 2.0, error="HTTP 503"), 2, 2)
    assert t is None
    state, t = on_result(state, ProbeResult(False, 3.0, error="HTTP 503"), 2, 2)
    assert t is not None and t.new == "unhealthy" and "2 consecutive failures" in t.reason
    assert "HTTP 503" in t.reason and state.since == 3.0


def test_ewma_matches_a_hand_computed_sequence() -> None:
    # a = 0.3: 100 → 100; 200 → 0.3·200 + 0.7·100 = 130; 50 → 0.3·50 + 0.7·130 = 106;
    # 106 → 0.3·106 + 0.7·106 = 106
    sample = None
    expected = [100.0, 130.0, 106.0, 106.0]
    for i, (value, want) in enumerate(zip([100.0, 200.0, 50.0, 106.0], expected, strict=True)):
        sample = update(sample, value, 0.3, float(i))
        assert sample.ewma_ms == pytest.approx(want)
        assert sample.samples == i + 1 and sample.last_at == float(i)
