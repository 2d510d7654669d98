"""A load balancer's last 24 hours as an SVG timeline: one lane each for health,
failovers, overrides and config changes; a bar while something lasted (a backend down, a
region off its first choice, an override set), a tick for each event.

Pure: event dicts in the shape of the persisted events — `time` (ISO 8601, `Z`), `kind`
(health, failover, failback, override, config, ...), `lb`, `pool`, `backend`, `regions`,
`cause`, `actor`, and where known `old`/`new` — and a time window in, SVG out.
`dnsd.events.events_for` picks a load balancer's events from the journal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from dnsd.admin.html import esc, parse_utc, utc

LANES = ("health", "failover", "override", "config")
LANE_OF = {
    "health": "health",
    "backend": "health",
    "pool": "health",
    "backend_health": "health",
    "pool_health": "health",
    "failover": "failover",
    "failback": "failover",
    "fail_open": "failover",
    "override": "override",
    "config": "config",
    "reload": "config",
}
COLOUR = {"health": "#cf222e", "failover": "#bf8700", "override": "#8250df", "config": "#57606a"}
BAD = frozenset({"unhealthy", "down"})  # a health event that starts a bar
CLEARED = frozenset({"", "none", "null", "removed"})  # an override event that ends one
WIDTH, LABEL_W, LANE_H, AXIS_H = 640, 76, 24, 26
GOOD = "#1a7f37"  # a health tick that says healthy again
MAX_TICKS = 400  # per timeline: beyond it the oldest are left out (the bars still show)


@dataclass(frozen=True, slots=True)
class Bar:
    lane: str
    start: float
    end: float
    ongoing: bool
    label: str


def describe(event: Mapping[str, Any]) -> str:
    """One line for people: what, about what, the change, why and who."""
    about = "/".join(str(event[k]) for k in ("pool", "backend") if event.get(k))
    if event.get("lb") and not about:
        about = f"load balancer {event['lb']}"
    parts = [str(event.get("kind", "event")), about]
    if event.get("regions"):
        parts.append(",".join(map(str, event["regions"])))
    if "new" in event:
        parts.append(f"{event.get('old', '?')} → {event['new']}")
    text = " ".join(p for p in parts if p)
    if event.get("cause"):
        text += f" ({event['cause']})"
    if event.get("actor"):
        text += f" by {event['actor']}"
    return text


def _subject(event: Mapping[str, Any]) -> str:
    if event.get("backend"):
        return f"{event.get('pool')}/{event['backend']}"
    return str(event.get("pool") or event.get("lb") or "")


def bars(events: list[tuple[float, Mapping[str, Any]]], end: float) -> list[Bar]:
    """What lasted: from the event that started it to the one that ended it (or `end`)."""
    opened: dict[tuple[str, str], tuple[float, str]] = {}
    out: list[Bar] = []
    for at, event in events:
        lane = LANE_OF.get(str(event.get("kind")))
        new = (
            str(event.get("new", event.get("state", ""))).lower()
            if ("new" in event or "state" in event)
            else None
        )
        key = (lane or "", _subject(event))
        if lane == "health" and new is not None:
            starts, ends = new in BAD, new not in BAD
        elif lane == "failover":
            starts, ends = event.get("kind") != "failback", event.get("kind") == "failback"
        elif lane == "override" and new is not None:
            starts, ends = new not in CLEARED, True  # a new value ends the old one's bar
        else:
            continue
        if ends and key in opened:
            since, label = opened.pop(key)
            out.append(Bar(key[0], since, at, False, label))
        if starts and key not in opened:
            opened[key] = (at, describe(event))
    out += [Bar(k[0], since, end, True, label) for k, (since, label) in opened.items()]
    return out


def frame_symbol(start: float, end: float) -> str:
    """Lanes, hour lines and UTC labels of every timeline of a page (one window), defined
    once (`<use href="#tl-frame">` in each timeline)."""
    span = max(end - start, 1.0)
    height = len(LANES) * LANE_H + AXIS_H
    out = [f'<symbol id="tl-frame" viewBox="0 0 {WIDTH} {height}">']
    for i, lane in enumerate(LANES):
        y = i * LANE_H
        out.append(
            f'<text x="4" y="{y + 17}" class="t-lane">{lane}</text>'
            f'<line x1="{LABEL_W}" y1="{y + LANE_H - 0.5}" x2="{WIDTH - 10}" '
            f'y2="{y + LANE_H - 0.5}" class="t-grid"/>'
        )
    axis_y = len(LANES) * LANE_H
    step = 3 * 3600 if span > 6 * 3600 else 3600 if span > 3600 else 600
    for at in range((int(start) // step + 1) * step, int(end) + 1, step):
        x = _x(at, start, end)
        out.append(f'<line x1="{x}" y1="0" x2="{x}" y2="{axis_y}" class="t-grid"/>')
        if LABEL_W + 20 < x < WIDTH - 62:  # clear of "UTC" and "now"
            out.append(f'<text x="{x}" y="{axis_y + 18}" class="t-axis">{utc(at)[11:16]}</text>')
    out.append(f'<text x="4" y="{axis_y + 18}" class="t-axis t-utc">UTC</text>')
    out.append(f'<text x="{WIDTH - 10}" y="{axis_y + 18}" class="t-axis t-now">now</text>')
    out.append("</symbol>")
    return "".join(out)


def _x(at: float, start: float, end: float) -> float:
    span = max(end - start, 1.0)
    return round(LABEL_W + (min(max(at, start), end) - start) / span * (WIDTH - LABEL_W - 10), 1)


def timeline_svg(
    events: Iterable[Mapping[str, Any]],
    start: float,
    end: float,
    title: str = "last 24 h",
    frame: bool = True,
) -> str:
    """The timeline of `events` between `start` and `end` (epoch seconds, UTC). With
    `frame`, the page defines `#tl-frame` (`frame_symbol`) once; else it is drawn here."""
    timed = sorted(
        ((at, e) for e in events if (at := parse_utc(e.get("time"))) is not None and at <= end),
        key=lambda pair: pair[0],
    )
    height = len(LANES) * LANE_H + AXIS_H
    out = [
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {height}" role="img">'
        f"<title>{esc(title)}</title>",
        f'<use href="#tl-frame" width="{WIDTH}" height="{height}"/>'
        if frame
        else frame_symbol(start, end).replace("<symbol", "<svg").replace("</symbol>", "</svg>"),
    ]
    for bar in bars(timed, end):
        if bar.end < start:
            continue
        y = LANES.index(bar.lane) * LANE_H + 4
        x0, x1 = _x(bar.start, start, end), _x(bar.end, start, end)
        until = "ongoing" if bar.ongoing else utc(bar.end)
        tip = f"{utc(bar.start)} – {until}: {bar.label}"
        fill = "url(#hatch-override)" if bar.lane == "override" else COLOUR[bar.lane]
        out.append(
            f'<rect class="bar" data-lane="{bar.lane}" x="{x0}" y="{y}" width="{max(x1 - x0, 2)}" '
            f'height="{LANE_H - 9}" fill="{fill}" stroke="{COLOUR[bar.lane]}">'
            f"<title>{esc(tip)}</title></rect>"
        )
    shown = [(at, e) for at, e in timed if at >= start][-MAX_TICKS:]
    for at, event in shown:
        lane = LANE_OF.get(str(event.get("kind")), "config")
        y = LANES.index(lane) * LANE_H
        colour = COLOUR[lane]
        if lane == "health" and str(event.get("new", "")).lower() not in BAD:
            colour = GOOD
        x = _x(at, start, end)
        out.append(
            f'<line class="tick" data-kind="{esc(event.get("kind"))}" x1="{x}" y1="{y + 2}" '
            f'x2="{x}" y2="{y + LANE_H - 3}" stroke="{colour}">'
            f"<title>{esc(utc(at) + ' ' + describe(event))}</title></line>"
        )
    out.append("</svg>")
    return "".join(out)


def for_lb(
    events: Iterable[Mapping[str, Any]], lb: str, pools: AbstractSet[str], lbs: AbstractSet[str]
) -> list[Mapping[str, Any]]:
    """The events that concern a load balancer: its own and its nested ones', those of the
    pools it can answer from, and config changes."""
    return [
        e
        for e in events
        if e.get("lb") in lbs
        or (e.get("pool") in pools)
        or (e.get("kind") == "config" and not e.get("lb"))
        or lb in (e.get("lbs") or ())
    ]
