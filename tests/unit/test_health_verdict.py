"""The pure verdict rules (health/verdict.py) and the overrides document, as tables."""

from __future__ import annotations

import errno
import logging
from types import MappingProxyType

import pytest

from dnsd.cluster.seal import Rejected, Sealer
from dnsd.health.overrides import Overrides
from dnsd.health.probes import is_local_failure
from dnsd.health.verdict import effective, news_level, next_view, quorum_degraded, verdict
from dnsd.health.view import BackendHealth, HealthView, RttSample


@pytest.mark.parametrize(
    ("states", "quorum", "initial", "expected"),
    [
        ([], None, "healthy", "unknown"),
        (["unknown", "unknown"], None, "unhealthy", "unknown"),  # nothing decided yet
        (["healthy"], None, "healthy", "healthy"),
        (["unhealthy"], None, "healthy", "unhealthy"),
        (["unhealthy", "healthy"], None, "healthy", "healthy"),  # majority of 2 is 2
        (["unhealthy", "unhealthy", "healthy"], None, "healthy", "unhealthy"),
        (["unhealthy", "healthy", "healthy"], 1, "healthy", "unhealthy"),  # quorum 1
        (["unhealthy", "unhealthy", "healthy"], 3, "healthy", "healthy"),  # quorum 3
        (["unhealthy", "unknown", "healthy"], None, "healthy", "healthy"),
        (["unhealthy", "unknown", "healthy"], None, "unhealthy", "unhealthy"),  # unknown is down
    ],
)
def test_quorum_verdict(states, quorum, initial, expected) -> None:
    assert verdict(states, quorum, initial) == expected


@pytest.mark.parametrize(
    ("states", "quorum", "last", "expected", "degraded"),
    [
        # docs/health.md, stale sources: None is a source whose node was lost; it does not vote.
        (["unhealthy", None, "healthy"], None, "unhealthy", "unhealthy", True),  # not readmitted
        (["unhealthy", None, "healthy"], None, "healthy", "healthy", True),  # nor failed
        (["healthy", None, "healthy"], None, "unhealthy", "healthy", False),  # 2 fresh agree
        (["unhealthy", None, "unhealthy"], None, "healthy", "unhealthy", False),
        ([None, None, "healthy"], None, "unhealthy", "unhealthy", True),
        ([None, None, None], None, "unhealthy", "unhealthy", True),
        (["unhealthy", None, "healthy"], None, None, "unknown", True),  # nothing to hold
        (["unhealthy", "healthy", None], 1, "healthy", "unhealthy", False),  # quorum 1: any one
        (["healthy", "healthy", None], 1, "unhealthy", "unhealthy", True),  # 3rd could say down
        (["unhealthy", "unhealthy", None], 3, "healthy", "healthy", True),
        (["healthy", "unhealthy", None], 3, "unhealthy", "healthy", False),  # quorum 3: one up
        (["unknown", None], None, "unhealthy", "unhealthy", True),
    ],
)
def test_stale_sources_do_not_vote(states, quorum, last, expected, degraded) -> None:
    assert verdict(states, quorum, "healthy", last) == expected
    assert quorum_degraded(states, quorum, "healthy") is degraded


@pytest.mark.parametrize(
    ("probed", "override", "initial", "serves"),
    [
        ("healthy", None, "healthy", True),
        ("unhealthy", None, "healthy", False),
        ("unknown", None, "healthy", True),
        ("unknown", None, "unhealthy", False),
        ("unhealthy", "up", "healthy", True),
        ("healthy", "down", "healthy", False),
        ("healthy", "drain", "healthy", True),  # drain leaves the eligible sets instead
        ("unhealthy", "drain", "healthy", False),
    ],
)
def test_effective_health(probed, override, initial, serves) -> None:
    assert effective(probed, override, initial) is serves


@pytest.mark.parametrize(
    ("previous", "probed", "level"),
    [
        (None, "healthy", None),
        ("healthy", "healthy", None),
        ("healthy", "unknown", None),
        ("unknown", "healthy", logging.INFO),  # the first verdict after a start: good news
        ("unknown", "unhealthy", logging.WARNING),
        ("healthy", "unhealthy", logging.WARNING),
        ("unhealthy", "healthy", logging.WARNING),
    ],
)
def test_verdict_news(previous, probed, level) -> None:
    assert news_level(previous, probed) == level


def test_rtt_only_changes_keep_the_states_generation() -> None:
    up = BackendHealth(healthy=True, probed="healthy")
    first = next_view(HealthView(), {("p", "b"): up}, {}, {})
    timed = BackendHealth(
        healthy=True, probed="healthy", rtt=MappingProxyType({"WEU": RttSample(5.0, 3, 1.0)})
    )
    rtt_only = next_view(first, {("p", "b"): timed}, {}, {})
    down = next_view(
        rtt_only, {("p", "b"): BackendHealth(healthy=False, probed="unhealthy")}, {}, {}
    )
    trickled = next_view(down, dict(down.backends), {}, {"lb": 0.5})
    generations = [(v.generation, v.states_generation) for v in (first, rtt_only, down, trickled)]
    assert generations == [(1, 1), (2, 1), (3, 2), (4, 3)]


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"backends": {"p/b": "sideways"}},
        {"backends": {"no-slash": "down"}},
        {"pools": {"p": "drain"}},  # drain is for backends only
        {"load_balancers": {"lb": {"trickle_ratio": 1.5}}},
        {"load_balancers": {"lb": {}}},
    ],
)
def test_malformed_override_documents_are_refused(document) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        Overrides.from_document(document)


def test_override_document_round_trips() -> None:
    doc = {
        "backends": {"p/b": "drain"},
        "pools": {"q": "down"},
        "load_balancers": {"lb": {"trickle_ratio": 0.25}},
        "updated_at": 12.5,
        "versions": {"backends/p/b": [12.5, "a"], "pools/gone": [11.0, "b"]},  # a removal
    }
    assert Overrides.from_document(doc).document() == doc
    meta = {"pools/q": {"actor": "ci", "reason": "drill", "since": 10.0, "expires": 70.0}}
    assert Overrides.from_document({**doc, "meta": meta}).document() == {**doc, "meta": meta}
    assert Overrides.from_document({**doc, "meta": meta}).expired(70.0) == [("pools", "q")]


def test_overrides_merge_entry_by_entry_and_a_removal_supersedes() -> None:
    a = Overrides.from_document(
        {"pools": {"p1": "down", "p3": "down"},
         "versions": {"pools/p1": [10.0, "a"], "pools/p3": [10.0, "a"]}}
    )  # fmt: skip
    b = Overrides.from_document(
        {"pools": {"p2": "down"},
         "versions": {"pools/p2": [11.0, "b"], "pools/p3": [12.0, "b"]}}  # b removed p3 later
    )  # fmt: skip
    merged = a.merged(b)
    assert merged.pools == {"p1": "down", "p2": "down"} and merged == b.merged(a)
    assert merged.versions["pools/p3"] == (12.0, "b")  # the removal is remembered
    stale = Overrides.from_document({"pools": {"p3": "up"}, "versions": {"pools/p3": [11.0, "c"]}})
    assert merged.merged(stale).pools == {"p1": "down", "p2": "down"}  # older: no resurrection


def test_sealed_messages_need_the_cluster_key() -> None:
    ours, theirs, open_ = Sealer(b"k" * 16), Sealer(b"x" * 16), Sealer(None)
    body = {"node": "a", "n": 1}
    assert ours.open(ours.seal(body)) == body
    for sealed, reason in [(theirs.seal(body), "unauthenticated"), (open_.seal(body), "unauthenticated"),
                           ("nope", "malformed"), ('{"body": "[1]", "mac": ""}', "unauthenticated"),
                           ("[" * 50_000, "malformed")]:  # fmt: skip
        with pytest.raises(Rejected) as refused:
            ours.open(sealed)
        assert refused.value.reason == reason
    assert open_.open(ours.seal(body)) == body  # --redis-insecure accepts sealed ones too


@pytest.mark.parametrize(
    ("error", "local"),
    [
        (OSError(errno.EMFILE, "Too many open files"), True),
        (OSError(errno.ENOBUFS, "No buffer space"), True),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), True),
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), False),  # the backend's
        (OSError(errno.EHOSTUNREACH, "No route to host"), False),  # the backend is gone
        (TimeoutError(), False),
    ],
)
def test_local_probe_failures_are_told_apart(error, local) -> None:
    wrapped = RuntimeError("connect failed")
    wrapped.__cause__ = error
    assert is_local_failure(error) is local and is_local_failure(wrapped) is local


def test_an_entry_one_side_never_saw_is_taken_whatever_its_clock() -> None:
    busy = Overrides.from_document(
        {"pools": {"p1": "down"}, "updated_at": 50.0, "versions": {"pools/p1": [50.0, "a"]}}
    )
    slow_clock = Overrides.from_document(
        {"pools": {"p2": "down"}, "updated_at": 15.0, "versions": {"pools/p2": [15.0, "b"]}}
    )
    assert busy.merged(slow_clock).pools == {"p1": "down", "p2": "down"}


def test_other_nodes_observations_are_a_bounded_lru(monkeypatch) -> None:
    from dnsd.health import remote
    from dnsd.health.probes import ProbeTarget

    monkeypatch.setattr(remote, "MAX_OBSERVATIONS", 3)
    table = remote.RemoteObservations()
    keys = [(ProbeTarget("m", f"10.0.0.{i}", 80), "WEU") for i in range(5)]
    for key in keys:
        table.add(key, remote.RemoteObservation("healthy", None, 100.0), now=100.0)
    table.add(keys[2], remote.RemoteObservation("unhealthy", None, 101.0), now=101.0)  # heard again
    assert [k for k in keys if table.current(k)] == [keys[2], keys[3], keys[4]]
