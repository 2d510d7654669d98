"""How a drill plan polls and judges time (dnsd.drill.run_plan, dnsd.drill.ramp_watch)."""

from __future__ import annotations

POLL_S = 0.1
SLACK_S = 1.0  # polling, a query's retry and scheduling, on top of the bound
# An expectation is met only by an answer that the answers after it keep fulfilling for this
# long: one stray answer (a 10% trickle's, or one a random policy drew) must not pass a drill.
# At dnsd every answer is a fresh decision, so 1 s (10 polls) makes a stray streak from a 10%
# trickle a 1e-10 chance; a resolver repeats its cached answer for a TTL, so through one the
# answers must hold for the TTL + 1 s (the cached answer replaced at least once).
HOLD_S = 1.0
