"""The lost-quorum rule (docs/health.md "Lost quorum"): a verdict held for quorum_hold, then
the fresh sources decide by their own majority; a tie keeps it."""

from __future__ import annotations

import pytest

from dnsd.config.loader import check_directory, load_config
from dnsd.health.verdict import QuorumVerdict, fresh_majority, quorum_verdict

H, U, S = "healthy", "unhealthy", None  # S: a stale source (does not vote)


@pytest.mark.parametrize(
    ("states", "last", "lost_since", "now", "hold", "expected"),
    [
        ([U, U, H], H, None, 100.0, 30.0, QuorumVerdict(U, "ok", None)),  # a quorum decides
        ([U, S, S], H, None, 100.0, 30.0, QuorumVerdict(H, "held", 100.0)),  # just lost: held
        ([U, S, S], H, 80.0, 100.0, 30.0, QuorumVerdict(H, "held", 80.0)),  # within the hold
        ([U, S, S], H, 70.0, 100.0, 30.0, QuorumVerdict(U, "fresh", 70.0)),  # one decides alone
        ([H, S, S], U, 70.0, 100.0, 30.0, QuorumVerdict(H, "fresh", 70.0)),  # ...both ways
        ([U, H, S], H, 0.0, 100.0, 30.0, QuorumVerdict(H, "held", 0.0)),  # a tie keeps it
        ([U, S, S], H, 0.0, 1e9, None, QuorumVerdict(H, "held", 0.0)),  # forever: old rule
        ([U, S, S], H, 98.0, 100.0, 2.0, QuorumVerdict(U, "fresh", 98.0)),  # hold boundary
        ([U, U, U], H, 70.0, 100.0, 30.0, QuorumVerdict(U, "ok", None)),  # quorum back
    ],
)
def test_quorum_verdict(states, last, lost_since, now, hold, expected) -> None:
    assert quorum_verdict(states, None, "healthy", last, lost_since, now, hold) == expected


def test_fresh_majority_counts_undecided_sources_only_for_initial_unhealthy() -> None:
    assert fresh_majority(["unknown"], "healthy") is None
    assert fresh_majority(["unknown"], "unhealthy") == "unhealthy"
    assert fresh_majority([H, U, U], "healthy") == "unhealthy"
    assert fresh_majority([], "healthy") is None


ZONE = """\
zone: t.test
soa: {mname: ns1.t.test., rname: h.t.test.}
records:
  "@": {NS: ns1.t.test.}
  ns1: {A: 192.0.2.1}
monitors:
  web: {type: tcp, sources: [WEU, ENAM, WNAM], quorum_hold: %s}
pools:
  p: {monitor: web, backends: [{name: b, address: 192.0.2.9}]}
"""


@pytest.mark.parametrize(("value", "seconds"), [("2s", 2.0), ("forever", None), ("1m", 60.0)])
def test_quorum_hold_is_a_duration_or_forever(tmp_path, value, seconds) -> None:
    (tmp_path / "z.yaml").write_text(ZONE % value)
    assert not [r for r in check_directory(tmp_path) if not r.warning]
    assert load_config(tmp_path)[0].monitors["web"].quorum_hold_s == seconds


def test_a_bad_quorum_hold_is_an_error_with_its_line(tmp_path) -> None:
    (tmp_path / "z.yaml").write_text(ZONE % "soon")
    text = "\n".join(str(r) for r in check_directory(tmp_path))
    assert "z.yaml:7: monitors.web.quorum_hold: expected a duration such as 30s" in text
