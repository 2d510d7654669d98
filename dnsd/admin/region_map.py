"""A load balancer's region map: the 13 client regions as tiles placed roughly where they
are on a world map, each filled with the colour of the pool that answers it now and
marked when that is not its first choice. Pure: a load balancer's entry of the status
document in, SVG and its text twin (a table) out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dnsd.admin.html import attrs, esc, shorten
from dnsd.config.pool_refs import names_lb
from dnsd.geo.regions import REGIONS, region_table

FAIL_OPEN = " (fail open)"  # how the status document marks a region answered with nothing healthy
UNKNOWN = "unknown"  # clients without a location
# Pool colours, in the order a load balancer lists its pools; none is red or purple, which
# mark outages and overrides. Each holds white text (WCAG AA at the tile's bold 12 px).
PALETTE = ("#0a5cad", "#a64b00", "#11705a", "#6b5200", "#3d5a80", "#9c2f6f", "#4a5568", "#005f73")
OUTAGE, MANUAL = "#cf222e", "#8250df"
TILE_W, TILE_H = 84, 50
WIDTH, HEIGHT = 680, 320
# Top-left corner of each tile: the Americas left, Europe and Africa in the middle, Asia
# and Oceania right; clients without a location bottom left.
PLACES: Mapping[str, tuple[int, int]] = {
    "WNAM": (20, 40),
    "ENAM": (112, 64),
    "NSAM": (140, 150),
    "SSAM": (160, 240),
    "WEU": (258, 28),
    "EEU": (350, 20),
    "NAF": (262, 118),
    "SAF": (300, 230),
    "ME": (368, 104),
    "SAS": (460, 140),
    "NEAS": (520, 44),
    "SEAS": (548, 178),
    "OC": (584, 258),
    UNKNOWN: (20, 258),
}
LAND = (  # continents, faint, for orientation only: (cx, cy, rx, ry)
    (110, 85, 105, 62),
    (190, 215, 48, 88),
    (330, 55, 78, 38),
    (320, 190, 62, 92),
    (500, 105, 150, 78),
    (610, 270, 58, 32),
)

State = Literal["first", "failover", "manual", "fail_open"]


@dataclass(frozen=True, slots=True)
class RegionFact:
    region: str
    path: str  # the chain of entries that answers, as the status document says it
    pool: str  # the pool that answers (the chain's last entry)
    first: str | None  # the first choice it left, when failed over
    state: State
    why: str  # why it is off its first choice ("" when it is not)


Cause = Callable[[str | None], tuple[bool, str]]  # first choice → (manual?, why)


def region_facts(lb: Mapping[str, Any], cause: Cause) -> list[RegionFact]:
    """One fact per region of the status document's `active`, in map order."""
    failed = set(lb.get("failed_over") or ())
    first = lb.get("first_choice") or {}
    facts = []
    for region in (*REGIONS, UNKNOWN):
        path = lb.get("active", {}).get(region)
        if path is None:
            continue
        open_ = path.endswith(FAIL_OPEN)
        pool = path.removesuffix(FAIL_OPEN).split(" -> ")[-1]
        state: State = "first"
        why = ""
        if open_:
            rule = (lb.get("all_down") or {}).get(region) or "fallback"
            state, why = (
                "fail_open",
                (
                    "nothing healthy: answered from the fallback"
                    if rule == "fallback"
                    else f"nothing healthy: when_all_down {rule} answers"
                ),
            )
        elif region in failed:
            manual, why = cause(first.get(region))
            state = "manual" if manual else "failover"
        facts.append(RegionFact(region, path, pool, first.get(region), state, why))
    return facts


def pool_colours(lbs: list[Mapping[str, Any]]) -> dict[str, str]:
    """Each pool's colour on a page: the order in which the page's load balancers list
    them, so a pool has one colour in every map (and the first choice is usually the
    first colour)."""
    order: list[str] = []
    for lb in lbs:
        answering = [
            p.removesuffix(FAIL_OPEN).split(" -> ")[-1] for p in lb.get("active", {}).values()
        ]
        for name in (*lb.get("default_pools", ()), lb.get("fallback_pool"), *answering):
            if name and not names_lb(name) and name not in order:
                order.append(name)
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(order)}


STATE_TEXT: Mapping[State, str] = {
    "first": "first choice",
    "failover": "failed over",
    "manual": "failed over (override)",
    "fail_open": "fail open",
}
STATE_MARK: Mapping[State, str] = {  # plain words: a symbol font may be missing
    "first": "",
    "failover": "FAILED OVER",
    "manual": "OVERRIDE",
    "fail_open": "FAIL OPEN",
}


def region_name(region: str) -> str:
    return "no location" if region == UNKNOWN else region_table().names.get(region, region)


def _tile(fact: RegionFact, colour: str) -> str:
    x, y = PLACES[fact.region]
    title = f"{fact.region} ({region_name(fact.region)}): {fact.path}"
    if fact.state != "first":
        title += f", {STATE_TEXT[fact.state]}"
    if fact.first:
        title += f" from {fact.first}"
    if fact.why:
        title += f": {fact.why}"
    parts = [
        f'<g class="tile"{attrs(data_region=fact.region, data_active=fact.pool)} '
        f'data-state="{fact.state}">',
        f"<title>{esc(title)}</title>",
        f'<rect x="{x}" y="{y}" width="{TILE_W}" height="{TILE_H}" rx="6" fill="{colour}"/>',
    ]
    if fact.state != "first":
        stroke = MANUAL if fact.state == "manual" else OUTAGE
        dash = ' stroke-dasharray="6 3"' if fact.state == "manual" else ""
        parts += [
            f'<rect x="{x}" y="{y}" width="{TILE_W}" height="{TILE_H}" rx="6" fill="url(#hatch)"/>',
            f'<rect x="{x + 1.5}" y="{y + 1.5}" width="{TILE_W - 3}" height="{TILE_H - 3}" rx="5" '
            f'fill="none" stroke="{stroke}" stroke-width="3"{dash}/>',
        ]
    label = fact.region
    parts += [
        f'<text x="{x + 7}" y="{y + 15}" class="t-code">{esc(label)}</text>',
        f'<text x="{x + 7}" y="{y + 30}" class="t-pool">{esc(shorten(fact.pool, 12))}</text>',
    ]
    if fact.state != "first":
        parts.append(
            f'<text x="{x + 7}" y="{y + 44}" class="t-mark">{STATE_MARK[fact.state]}</text>'
        )
    parts.append("</g>")
    return "".join(parts)


def land_symbol() -> str:
    """The faint continents, defined once per page (`<use href="#land">` in each map)."""
    shapes = "".join(
        f'<ellipse cx="{cx}" cy="{cy}" rx="{rx}" ry="{ry}"/>' for cx, cy, rx, ry in LAND
    )
    return f'<symbol id="land" viewBox="0 0 {WIDTH} {HEIGHT}"><g class="land">{shapes}</g></symbol>'


def region_map_svg(
    title: str, facts: list[RegionFact], colours: Mapping[str, str], ident: str
) -> str:
    """The map; `ident` makes its title's id unique in the page. The continents (`#land`)
    and the hatch pattern (`#hatch`) are defined once by the page."""
    tiles = "".join(_tile(f, colours.get(f.pool, PALETTE[-1])) for f in facts)
    return (
        f'<svg class="region-map" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="{esc(ident)}"><title id="{esc(ident)}">{esc(title)}</title>'
        f'<use href="#land" width="{WIDTH}" height="{HEIGHT}"/>{tiles}</svg>'
    )


def legend_html(colours: Mapping[str, str], lb: Mapping[str, Any], facts: list[RegionFact]) -> str:
    """This load balancer's pools with their colours, and the marks in use, as text."""
    mine = [*lb.get("default_pools", ()), lb.get("fallback_pool"), *(f.pool for f in facts)]
    items = [
        # an SVG swatch, not a style attribute: the page's CSP allows no inline style
        f'<li><svg class="sw" viewBox="0 0 1 1" aria-hidden="true"><rect width="1" height="1" '
        f'fill="{esc(colours[pool])}"/></svg>{esc(pool)}</li>'
        for pool in dict.fromkeys(mine)
        if pool in colours
    ]
    states = {f.state for f in facts}
    if "failover" in states:
        items.append('<li><span class="sw sw-outage"></span>failed over (outage)</li>')
    if "manual" in states:
        items.append('<li><span class="sw sw-manual"></span>failed over by an override</li>')
    if "fail_open" in states:
        items.append('<li><span class="sw sw-outage"></span>fail open (nothing healthy)</li>')
    return f'<ul class="legend">{"".join(items)}</ul>'


def region_table_html(facts: list[RegionFact]) -> str:
    """The map as text: which regions each pool answers, and a row for every region off
    its first choice with the first choice and why."""
    by_pool: dict[tuple[str, bool], list[str]] = {}
    for f in facts:
        by_pool.setdefault((f.path, f.state == "first"), []).append(f.region)
    groups = "".join(
        f"<li><b>{esc(path)}</b>{'' if first else ' (not the first choice)'}: "
        f"{esc(', '.join(regions))}</li>"
        for (path, first), regions in by_pool.items()
    )
    off = [f for f in facts if f.state != "first"]
    rows = "".join(
        f"<tr{attrs(data_region=f.region, class_='st-' + f.state)}><td>{esc(f.region)}</td>"
        f'<td class="name">{esc(f.path)}</td><td>{esc(STATE_TEXT[f.state])}</td>'
        f'<td class="name">{esc(f.first or "-")}</td>'
        f"<td>{esc(f.why)}</td></tr>"
        for f in off
    )
    table = (
        '<div class="scroll"><table class="regions"><thead><tr><th>region</th>'
        "<th>answered by</th><th>state</th><th>first choice</th><th>why</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></div>"
        if off
        else ""
    )
    return f'<ul class="by-pool">{groups}</ul>{table}'
