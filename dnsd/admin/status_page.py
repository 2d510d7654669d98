"""The status page (`GET /`), rendered on the server from the status document — the very
dict `/api/v1/status` sends — so it is complete with JavaScript off; the page's script
only fetches the same HTML again (`?fragment=1`) to stay current. Here the page is put
together; its parts are `status_banner`, `status_lbs` (a section per load balancer),
`status_pools` (the pools table) and `status_since` (since and until when)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from importlib import resources
from string import Template
from typing import Any
from urllib.parse import urlencode

from dnsd.admin.html import esc, parse_utc, utc
from dnsd.admin.region_map import land_symbol, pool_colours
from dnsd.admin.status_banner import banner
from dnsd.admin.status_lbs import lb_section
from dnsd.admin.status_pools import pools_table
from dnsd.admin.status_since import DAY_S
from dnsd.admin.timeline import describe, frame_symbol

PAGE_LIMIT = 20  # load balancers and pools per page unless `limit=` says otherwise


def _shell() -> Template:
    text = resources.files("dnsd.admin").joinpath("status.html").read_text(encoding="utf-8")
    return Template(text)


SHELL = _shell()


def _inline_hash(tag: str) -> str:
    """The CSP source for the page's one inline `<style>` or `<script>`: its SHA-256, so
    nothing else inline (an injected script or style) runs."""
    text = SHELL.template
    start = text.index(f"<{tag}>") + len(tag) + 2
    body = text[start : text.index(f"</{tag}>", start)]
    return "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"


# What the page needs and no more: its own style and script (by hash), fetches of itself
# (`?fragment=1`), its search form; no frames (clickjacking), no plugins, no base override.
CSP = (
    f"default-src 'none'; style-src {_inline_hash('style')}; "
    f"script-src {_inline_hash('script')}; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HTML_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
# Every admin answer (JSON, metrics, the page): never sniffed as something else.
ALL_HEADERS = {"X-Content-Type-Options": "nosniff"}


def render_page(
    doc: Mapping[str, Any],
    events_by_lb: Mapping[str, list[Mapping[str, Any]]],
    query: Mapping[str, str],
    now: float,
    refresh_ms: int,
) -> str:
    node = doc["node"].get("name") or "dnsd"
    return SHELL.substitute(
        title=esc(f"dnsd {node} status"),
        lb=esc(query.get("lb", "")),
        pool=esc(query.get("pool", "")),
        limit=esc(query.get("limit", "")),
        refresh=str(refresh_ms),
        live=render_live(doc, events_by_lb, query, now),
    )


def render_live(
    doc: Mapping[str, Any],
    events_by_lb: Mapping[str, list[Mapping[str, Any]]],
    query: Mapping[str, str],
    now: float,
) -> str:
    """Everything that changes: banner, load balancers, pools, events, paging."""
    overrides = {(o["kind"], o["target"]): o for o in doc.get("overrides_active", ())}
    parts = [
        '<svg width="0" height="0" class="defs" aria-hidden="true">',
        land_symbol(),
        frame_symbol(now - DAY_S, now),
        "</svg>",
        banner(doc, events_by_lb, now),
        paging(doc, query),
        '<h2 id="lbs-head">Load balancers: the pool answering each client region now</h2>',
        '<div id="lbs">',
    ]
    colours = pool_colours(doc["load_balancers"])
    for i, lb in enumerate(doc["load_balancers"]):
        events = events_by_lb.get(lb["name"], [])
        parts.append(lb_section(lb, i, overrides, colours, events, now))
    if not doc["load_balancers"]:
        parts.append('<p class="meta">no load balancer matches</p>')
    parts += [
        "</div>",
        "<h2>Pools and backends</h2>",
        pools_table(doc["pools"], overrides, now),
        "<h2>Recent health events and overrides</h2>",
        events_list(doc.get("events", ())),
    ]
    return "".join(parts)


# -- paging -------------------------------------------------------------------------------
def paging(doc: Mapping[str, Any], query: Mapping[str, str]) -> str:
    total, first = doc["total"]["load_balancers"], doc["offset"]
    shown, limit = len(doc["load_balancers"]), doc["limit"]
    text = (
        f" load balancers {first + 1 if total and shown else 0}–{first + shown} of {total}"
        f" · pools {len(doc['pools'])} of {doc['total']['pools']} "
    )
    links = []
    keep = {k: v for k, v in query.items() if k in ("lb", "pool", "limit") and v}
    if first > 0:
        links.append(_page_link(keep, max(0, first - limit), "« previous"))
    if first + shown < max(total, doc["total"]["pools"]):
        links.append(_page_link(keep, first + limit, "next »"))
    return f'<p class="meta" id="page">{esc(text)}{" ".join(links)}</p>'


def _page_link(keep: Mapping[str, str], offset: int, text: str) -> str:
    return f'<a href="?{esc(urlencode({**keep, "offset": offset}))}">{esc(text)}</a>'


def events_list(events: Any) -> str:
    items = "".join(
        f'<li data-kind="{esc(e["kind"])}"><time>{esc(utc(parse_utc(e.get("time"))))}</time> '
        f"{esc(describe(e))}</li>"
        for e in events
    )
    return f'<ul class="events" id="events">{items or "<li class=meta>no events yet</li>"}</ul>'
