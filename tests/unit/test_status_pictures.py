"""The status page's pictures as pure functions: the 24 h timeline from event dicts (the
persisted events' shape) and the region map from a status document entry."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from dnsd.admin.html import parse_utc
from dnsd.admin.region_map import PLACES, pool_colours, region_facts, region_map_svg
from dnsd.admin.timeline import bars, for_lb, timeline_svg
from dnsd.geo.regions import REGIONS

NOW = datetime(2026, 12, 1, 18, 0, tzinfo=UTC).timestamp()
DAY = 86_400.0
SVG = "{http://www.w3.org/2000/svg}"


def iso(seconds_ago: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(svg: str) -> ET.Element:
    """Well-formed XML (the SVG namespace added: inline SVG in HTML has none)."""
    return ET.fromstring(svg.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1))


EVENTS = [
    {"time": iso(7200), "kind": "health", "pool": "eu", "backend": "eu-1", "old": "healthy",
     "new": "unhealthy", "cause": "HTTP 503 from WEU", "actor": "probe"},
    {"time": iso(3600), "kind": "health", "pool": "eu", "backend": "eu-1", "old": "unhealthy",
     "new": "healthy", "cause": "HTTP 200", "actor": "probe"},
    {"time": iso(1800), "kind": "override", "pool": "eu", "old": None, "new": "down",
     "cause": "admin: INC-1", "actor": "oncall"},
    {"time": iso(1700), "kind": "failover", "lb": "web", "regions": ["WEU"], "cause": "override"},
    {"time": iso(30 * 3600), "kind": "config", "cause": "reload", "actor": "system"},
]  # fmt: skip


def test_bars_last_from_the_event_that_starts_them_to_the_one_that_ends_them() -> None:
    timed = sorted((parse_utc(e["time"]), e) for e in EVENTS[:4])  # type: ignore[type-var]
    found = {(b.lane, b.start, b.end, b.ongoing) for b in bars(timed, NOW)}  # type: ignore[arg-type]
    assert found == {
        ("health", NOW - 7200, NOW - 3600, False),
        ("override", NOW - 1800, NOW, True),  # still set: up to now
        ("failover", NOW - 1700, NOW, True),
    }


def test_timeline_draws_each_event_in_the_window_and_escapes_text() -> None:
    hostile = {**EVENTS[2], "cause": '<script>alert("x")</script>', "time": iso(60)}
    svg = timeline_svg([*EVENTS, hostile], NOW - DAY, NOW, title="web <&>", frame=False)
    root = parse(svg)
    ticks = root.findall(f"{SVG}line[@class='tick']")
    assert len(ticks) == 5  # the config event 30 h ago is outside the window
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert root.find(f"{SVG}title").text == "web <&>"  # type: ignore[union-attr]
    xs = [float(t.get("x1")) for t in ticks]  # type: ignore[arg-type]
    assert xs == sorted(xs) and max(xs) <= 630  # left to right, inside the plot
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "UTC" in labels and "15:00" in labels


def test_events_of_a_load_balancer() -> None:
    mine = for_lb(EVENTS, "web", pools={"eu", "us"}, lbs={"web"})
    assert len(mine) == 5
    assert for_lb(EVENTS, "api", pools={"us"}, lbs={"api"}) == [EVENTS[4]]


def lb_entry(active: dict[str, str], failed: list[str], first: dict[str, str]) -> dict:
    return {"name": "web", "default_pools": ["eu", "us"], "fallback_pool": None,
            "active": active, "failed_over": failed, "first_choice": first}  # fmt: skip


def test_region_map_colours_each_region_by_its_pool_and_marks_the_ones_off_first_choice() -> None:
    active = {r: "eu" for r in (*REGIONS, "unknown")}
    active.update(WEU="us", EEU="maint (fail open)")
    lb = lb_entry(active, ["WEU"], {"WEU": "eu"})
    facts = region_facts(lb, lambda first: (True, f"override on <{first}>"))
    assert [f.region for f in facts] == [*REGIONS, "unknown"] and set(PLACES) >= set(REGIONS)
    states = {f.region: f.state for f in facts}
    assert states["WEU"] == "manual" and states["EEU"] == "fail_open" and states["OC"] == "first"
    colours = pool_colours([lb])
    assert colours["eu"] != colours["us"] != colours["maint"]
    svg = region_map_svg("map of <web>", facts, colours, "m0")
    root = parse(svg)
    tiles = {g.get("data-region"): g for g in root.iter(f"{SVG}g") if g.get("class") == "tile"}
    assert len(tiles) == 14
    assert tiles["WEU"].get("data-active") == "us"
    assert tiles["WEU"].find(f"{SVG}rect").get("fill") == colours["us"]  # type: ignore[union-attr]
    assert "override on <eu>" in tiles["WEU"].find(f"{SVG}title").text  # type: ignore[operator,union-attr]
    assert "OVERRIDE" in "".join(t.text or "" for t in tiles["WEU"].iter(f"{SVG}text"))
    assert len(tiles["OC"].findall(f"{SVG}rect")) == 1  # no hatch, no outline
    assert "<web>" not in svg and "&lt;eu&gt;" in svg


def test_tiles_do_not_overlap() -> None:
    from dnsd.admin.region_map import HEIGHT, TILE_H, TILE_W, WIDTH

    boxes = list(PLACES.values())
    for i, (x, y) in enumerate(boxes):
        assert x >= 0 and x + TILE_W <= WIDTH and y >= 0 and y + TILE_H <= HEIGHT
        for x2, y2 in boxes[i + 1 :]:
            assert x + TILE_W <= x2 or x2 + TILE_W <= x or y + TILE_H <= y2 or y2 + TILE_H <= y
