"""The event record, its journal (events.jsonl: bounded, rotated, read back, a corrupt line
skipped) and the pure failover/failback comparison of active pools."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from dnsd.admin.active_pool_watch import moves
from dnsd.events import Event, EventLog, events_for, iso_z, parse_iso
from dnsd.events.record import make

T0 = parse_iso("2026-12-01T10:00:00Z")


def test_the_record_has_every_field_and_round_trips() -> None:
    event = make(T0 + 0.25, "failover", "HTTP 503 from WEU", "probe", lb="web", pool="standby",
                 regions=("ENAM", "WEU"), changes={"WEU": {"from": "primary", "to": "standby"}})  # fmt: skip
    data = event.to_json()
    assert data["time"] == "2026-12-01T10:00:00.250Z"
    assert {k: data[k] for k in ("kind", "lb", "pool", "backend", "regions", "cause", "actor")} == {
        "kind": "failover", "lb": "web", "pool": "standby", "backend": None,
        "regions": ["ENAM", "WEU"], "cause": "HTTP 503 from WEU", "actor": "probe",
    }  # fmt: skip
    assert data["changes"]["WEU"] == {"from": "primary", "to": "standby"}
    back = Event.from_json(json.loads(json.dumps(data)))
    assert back.to_json() == data and back.subject == "load balancer web"


@pytest.mark.parametrize(
    ("text", "epoch"),
    [("2026-12-01T10:00:00Z", T0), ("2026-12-01T10:00:00", T0), ("2026-12-01T11:00:00+01:00", T0)],
)
def test_times_are_utc(text: str, epoch: float) -> None:
    assert parse_iso(text) == epoch
    assert iso_z(epoch) == "2026-12-01T10:00:00.000Z"


@pytest.mark.parametrize("bad", ["", "yesterday", None, 5])
def test_a_time_that_is_not_iso_8601_is_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_iso(bad)


def _events(n: int, kind: str = "override", lb: str = "web") -> list[Event]:
    return [make(T0 + i, kind, "override", "alice", lb=lb, new=str(i)) for i in range(n)]


def test_events_survive_a_restart_and_the_file_is_bounded(tmp_path: Path) -> None:
    journal = EventLog.open(tmp_path, memory=1000)
    journal.max_bytes = 4000
    for event in _events(300):
        journal.add(event)
    journal.close()
    current, rotated = tmp_path / "events.jsonl", tmp_path / "events.jsonl.1"
    assert current.stat().st_size <= 4000 and rotated.stat().st_size <= 4000  # two files
    again = EventLog.open(tmp_path, memory=1000)
    loaded = list(again)
    assert loaded, "nothing read back"
    assert [e.details["new"] for e in loaded] == [str(i) for i in range(300 - len(loaded), 300)]
    assert loaded[-1].to_json() == _events(300)[-1].to_json()  # the newest, whole
    small = EventLog.open(tmp_path, memory=5)  # memory is bounded too: the newest kept
    assert [e.details["new"] for e in small] == ["295", "296", "297", "298", "299"]


def test_a_corrupt_line_is_skipped_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = [json.dumps(e.to_json()) for e in _events(3)]
    lines = [good[0], '{"kind": "override", "time": "2026-12', "not json", "[1, 2]", good[1],
             json.dumps({"time": "2026-12-01T10:00:00Z"}), good[2]]  # fmt: skip
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, "dnsd.events"):
        journal = EventLog.open(tmp_path)
    assert [e.details["new"] for e in journal] == ["0", "1", "2"]
    skipped = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 1 and "4 line(s)" in skipped[0].getMessage()


def test_select_filters_by_time_kind_and_lb_and_is_bounded() -> None:
    journal = EventLog()
    for i, (kind, lb) in enumerate(
        [("override", "web"), ("failover", "web"), ("failover", "api"), ("failback", "web")]
    ):
        journal.add(make(T0 + i, kind, "c", "a", lb=lb))
    assert [e.kind for e in journal.select(since=T0 + 1)[0]] == ["failover", "failover", "failback"]
    assert [e.lb for e in journal.select(kinds={"failover"})[0]] == ["web", "api"]
    assert [e.kind for e in journal.select(lb="web", until=T0 + 1)[0]] == ["override", "failover"]
    newest, more = journal.select(limit=2)
    assert [e.time for e in newest] == [T0 + 2, T0 + 3] and more
    assert journal.select(limit=4)[1] is False
    assert journal.added == 4 and [e.time for e in journal.recent(2)] == [T0 + 3, T0 + 2]


def test_events_for_one_lb_in_a_window_is_pure() -> None:
    events = [
        make(T0, "failover", "c", "probe", lb="web"),
        make(T0 + 10, "backend_health", "HTTP 503 from WEU", "probe", pool="primary", backend="p1"),
        make(T0 + 20, "failover", "c", "probe", lb="api"),
        make(T0 + 30, "failback", "c", "probe", lb="web"),
        make(T0 + 40, "config", "reload", "system"),
    ]
    assert [e["time"] for e in events_for(events, "web", T0, T0 + 30)] == [
        iso_z(T0),
        iso_z(T0 + 30),
    ]
    with_pools = events_for(list(reversed(events)), "web", T0 + 5, T0 + 60, pools={"primary"})
    assert [e["kind"] for e in with_pools] == ["backend_health", "failback", "config"]
    nested = events_for(events, "web", T0, T0 + 25, lbs={"api"})  # web nests api
    assert [e["lb"] for e in nested] == ["web", "api"]
    assert [e["kind"] for e in events_for(events, "web", T0 + 31, T0 + 60)] == ["config"]
    assert events_for(events, "web", T0 + 41, T0 + 60) == []


REGIONS = ("WEU", "ENAM", "unknown")


def _states(active: dict[str, str], first: str) -> tuple[dict[str, str], list[str]]:
    return dict(active), [r for r, path in active.items() if not path.endswith(first)]


def test_moves_name_only_the_regions_that_moved_with_cause_and_actor() -> None:
    before = {"web": _states(dict.fromkeys(REGIONS, "primary"), "primary")}
    half = dict.fromkeys(REGIONS, "primary") | {"WEU": "standby"}
    after = {"web": _states(half, "primary")}
    [event] = moves(before, after, frozenset(), T0, "HTTP 503 from WEU", "probe")
    assert (event.kind, event.lb, event.regions, event.pool) == (
        "failover",
        "web",
        ("WEU",),
        "standby",
    )
    assert (event.cause, event.actor) == ("HTTP 503 from WEU", "probe")
    assert event.details["changes"] == {"WEU": {"from": "primary", "to": "standby"}}
    [back] = moves(after, before, frozenset(), T0 + 1, "probe ok from WEU", "probe")
    assert (back.kind, back.regions, back.pool) == ("failback", ("WEU",), "primary")
    assert moves(before, before, frozenset(), T0, "c", "a") == []


def test_a_move_to_fail_open_is_a_failover_and_a_fail_open() -> None:
    before = {"web": _states({"WEU": "standby"}, "primary")}
    after = {"web": _states({"WEU": "standby (fail open)"}, "primary")}
    kinds = [e.kind for e in moves(before, after, frozenset(), T0, "c", "a")]
    assert kinds == ["failover", "fail_open"]


def test_fail_open_on_the_first_choice_is_no_failback_and_leaving_it_is() -> None:
    healthy = {"web": _states({"WEU": "primary"}, "primary")}
    open_ = {"web": _states({"WEU": "primary (fail open)"}, "primary")}
    assert [e.kind for e in moves(healthy, open_, frozenset(), T0, "c", "a")] == [
        "failover", "fail_open",
    ]  # fmt: skip
    assert [e.kind for e in moves(open_, healthy, frozenset(), T0, "c", "a")] == ["failback"]


def test_a_config_change_between_first_choices_is_no_failover() -> None:
    before = {"web": _states({"WEU": "old"}, "old")}
    after = {"web": ({"WEU": "new"}, [])}
    assert moves(before, after, frozenset(), T0, "reload", "system") == []


def test_a_nested_lb_lists_only_the_regions_that_reach_it() -> None:
    # outer sends WEU through lb:inner, everyone else to `us`; inner alone would steer every
    # region, and all of them move when inner fails over.
    outer_before = {"WEU": "lb:inner -> eu-a", "ENAM": "us", "unknown": "us"}
    outer_after = outer_before | {"WEU": "lb:inner -> eu-b"}
    before = {
        "outer": (outer_before, []),
        "inner": (dict.fromkeys(REGIONS, "eu-a"), []),
    }
    after = {
        "outer": (outer_after, ["WEU"]),
        "inner": (dict.fromkeys(REGIONS, "eu-b"), list(REGIONS)),
    }
    events = moves(before, after, frozenset({"inner"}), T0, "trickle 1.0", "alice")
    assert {(e.lb, e.regions) for e in events} == {("outer", ("WEU",)), ("inner", ("WEU",))}
    # inner named by a record too: it answers every region itself
    events = moves(before, after, frozenset(), T0, "trickle 1.0", "alice")
    assert {(e.lb, e.regions) for e in events} == {
        ("outer", ("WEU",)),
        ("inner", tuple(sorted(REGIONS))),
    }


REACH_CONFIG = """\
zone: r.test
soa: {mname: ns1.r.test., rname: h.r.test.}
records:
  "@": {NS: ns1.r.test.}
  ns1: {A: 192.0.2.1}
  www: {lb: web}
  eu: {lb: outer}
pools:
  primary: {backends: [{name: p1, address: 192.0.2.10}]}
  standby: {backends: [{name: s1, address: 192.0.2.20}]}
  eu-a: {backends: [{name: a1, address: 192.0.2.31}]}
  eu-b: {backends: [{name: b1, address: 192.0.2.32}]}
load_balancers:
  web: {default_pools: [primary, standby]}
  outer: {steering: geo, region_pools: {WEU: ["lb:inner"]}, default_pools: [standby]}
  inner: {default_pools: [eu-a, eu-b]}
"""


def test_only_the_load_balancers_that_reach_a_change_are_steered_again(tmp_path: Path) -> None:
    from types import MappingProxyType

    from dnsd.admin.active_pool_watch import reach_of
    from dnsd.health.view import BackendHealth, HealthView, health_change
    from dnsd.loading import load_snapshot

    (tmp_path / "r.yaml").write_text(REACH_CONFIG)
    reach = reach_of(load_snapshot(tmp_path, 1))
    assert reach.nested_only == frozenset({"inner"})
    assert sorted(reach.affected({"eu-a"}, set())) == ["inner", "outer"]
    assert sorted(reach.affected({"standby"}, set())) == ["outer", "web"]
    assert reach.affected({"primary"}, set()) == ["web"]
    assert sorted(reach.affected(set(), {"inner"})) == ["inner", "outer"]
    assert reach.affected(set(), set()) == []
    up = HealthView(backends=MappingProxyType({("eu-a", "a1"): BackendHealth(healthy=True)}))
    down = HealthView(
        backends=MappingProxyType({("eu-a", "a1"): BackendHealth(healthy=False)}),
        pool_overrides=MappingProxyType({"standby": "down"}),
        trickle_overrides=MappingProxyType({"web": 1.0}),
    )
    change = health_change(up, down)
    assert change.pools == {"eu-a", "standby"} and change.lbs == {"web"}
    assert not health_change(up, up).pools


def test_moves_compared_a_slice_at_a_time_are_the_moves_of_the_whole() -> None:
    """The failover check compares many load balancers a slice at a time (the event loop
    answers in between): the events, nested load balancers' regions included, are the
    ones of one comparison, in the same order."""
    import asyncio
    from types import SimpleNamespace

    from dnsd.admin.active_pool_watch import COMPARE_SLICE, ActivePoolWatch, Reach

    count = 3 * COMPARE_SLICE + 7
    names = [f"lb{i}" for i in range(count)]
    inner = {f"inner{i}": f"lb{i}" for i in range(0, count, 2)}  # reached only through lb{i}
    before, after = {}, {}
    for i, name in enumerate(names):
        paths = dict.fromkeys(REGIONS, "primary")
        if f"inner{i}" in inner:  # only WEU's path goes through the nested one
            paths["WEU"] = f"lb:inner{i} -> primary"
        before[name] = _states(paths, "primary")
        moved = paths | {REGIONS[i % 3]: "standby"}
        after[name] = _states(moved if i % 5 else paths, "primary")
    for nested in inner:
        before[nested] = _states(dict.fromkeys(REGIONS, "primary"), "primary")
        after[nested] = _states(dict.fromkeys(REGIONS, "standby"), "primary")
    nested_only = frozenset(inner)
    whole = moves(before, after, nested_only, T0, "c", "a")
    journal = EventLog(None)
    watch = ActivePoolWatch(lambda *_: {}, lambda: None, lambda: None, journal)  # type: ignore
    graph = SimpleNamespace(nested_only=nested_only)
    watch._reach = Reach(None, graph)  # type: ignore[arg-type]  # (no when_all_down rules)
    asyncio.run(watch._compare_in_slices(before, after, list(after), T0, "c", "a"))
    assert [e.to_json() for e in journal] == [e.to_json() for e in whole]
    assert len(whole) > 2 * COMPARE_SLICE // 5
    assert {e.regions for e in whole if e.lb.startswith("inner")} == {("WEU",)}
