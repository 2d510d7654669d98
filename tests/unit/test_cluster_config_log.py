"""The shared config history's rules (dnsd/cluster/config_log.py), as cases: how a node's
own history meets the one in Redis."""

from __future__ import annotations

import pytest

from dnsd.cluster.config_log import GENESIS, Record, chain, new_record, plan, record_of


def history(*names: str, after: Record | None = None) -> list[Record]:
    out: list[Record] = []
    for name in names:
        out.append(new_record(out[-1] if out else after, "a", "a", 1.0, [(f"zones/z/records/{name}", {"A": ["192.0.2.1"]})]))  # fmt: skip
    return out


R = history("r1", "r2", "r3", "r4", "r5")
FORK = history("x4", after=R[2])  # another node's r4 on top of r3


@pytest.mark.parametrize(
    ("ours", "shared", "apply", "append", "reappend"),
    [
        ([], R, R, [], []),  # a new node: everything
        (R[:3], R, R[3:], [], []),  # behind: what it lacks
        (R, R, [], [], []),  # in step
        (R, [], [], R, []),  # Redis lost everything: seeded from ours
        (R, R[:3], [], R[3:], []),  # Redis lost our newest: put back as they are
        (R, [*R[:3], *FORK], FORK, [], R[3:]),  # others wrote after: theirs, ours again on top
        (R[:3], [*R[:3], *FORK], FORK, [], []),  # just behind the fork
    ],
)
def test_a_node_follows_the_shared_history(
    ours: list[Record], shared: list[Record], apply: list[Record], append: list[Record],
    reappend: list[Record],
) -> None:  # fmt: skip
    steps = plan(ours, shared)
    assert steps.diverged is None
    assert (list(steps.apply), list(steps.append), list(steps.reappend)) == (
        apply,
        append,
        reappend,
    )


def test_histories_with_nothing_in_common_diverge() -> None:
    headless = R[2:]  # a shared history that does not start at the beginning
    assert plan([], headless).diverged
    assert plan(history("other"), headless).diverged


def test_a_record_that_does_not_link_is_an_orphan() -> None:
    linked, orphans = chain([*R[:3], R[1], R[3]])  # r2 replayed in the middle
    assert linked == R[:4] and orphans == [R[1]]


def test_a_record_whose_content_changed_is_refused() -> None:
    body = R[0].body()
    assert record_of(body) == R[0] and R[0].prev == GENESIS
    body["entries"][0]["body"] = {"A": ["203.0.113.66"]}
    with pytest.raises(ValueError, match="digest"):
        record_of(body)
    renumbered = {**R[1].body(), "seq": 7}
    with pytest.raises(ValueError, match="digest"):
        record_of(renumbered)
