"""The status page (`GET /`), rendered on the server from the status document — the very
dict `/api/v1/status` sends — so it is complete with JavaScript off; the page's script
only fetches the same HTML again (`?fragment=1`) to stay current."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from importlib import resources
from string import Template
from typing import Any
from urllib.parse import urlencode

from dnsd.admin.html import attrs, esc, parse_utc, shorten, utc
from dnsd.admin.region_map import (
    RegionFact,
    land_symbol,
    legend_html,
    pool_colours,
    region_facts,
    region_map_svg,
    region_table_html,
)
from dnsd.admin.timeline import describe, frame_symbol, timeline_svg

PAGE_LIMIT = 20  # load balancers and pools per page unless `limit=` says otherwise
DAY_S = 86_400.0
NAMES_SHOWN = 5  # DNS names in a load balancer's heading; the rest in its details


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


# -- banner ---------------------------------------------------------------------------------
def override_text(o: Mapping[str, Any], now: float) -> str:
    """`pool eu down — “INC-1” — by oncall since …Z, until …Z (1h 59m left)`."""
    what = {"load_balancer": "load balancer"}.get(o["kind"], o["kind"])
    value = o.get("state", o.get("trickle_ratio"))
    text = f"{what} {o['target']} " + (f"trickle {value}" if "trickle_ratio" in o else str(value))
    if value == 1.0 and "trickle_ratio" in o:
        text += " (manual failover)"
    text += f" — “{o['reason']}”" if o.get("reason") else " — no reason given"
    text += f" — by {o.get('actor') or 'unknown'}"
    if o.get("since"):
        text += f" since {utc(parse_utc(o['since']))}"
    expires = parse_utc(o.get("expires"))
    text += f", until {utc(expires)} ({_left(expires - now)} left)" if expires else ", no expiry"
    return text


def _left(seconds: float) -> str:
    minutes = max(0, int(seconds // 60))
    return f"{minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


# -- since when ------------------------------------------------------------------------------
def _timed(events: Iterable[Mapping[str, Any]]) -> list[tuple[float, Mapping[str, Any]]]:
    timed = ((parse_utc(e.get("time")), e) for e in events)
    return sorted(((at, e) for at, e in timed if at is not None), key=lambda pair: pair[0])


def regions_off_since(lb: str, events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per client region of `lb` off its first choice, when it left it: the `failover` (or
    `fail_open`) event that took it away, not a later move on to another pool; a `failback`
    ends it. Only what the events kept (the last 24 h) say."""
    left: dict[str, float] = {}
    for at, e in _timed(e for e in events if e.get("lb") == lb):
        for region in e.get("regions") or ():
            if e.get("kind") in ("failover", "fail_open"):
                left.setdefault(region, at)
            elif e.get("kind") == "failback":
                left.pop(region, None)
    return left


def backends_down_since(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per `pool/backend` found unhealthy by its probes, since when (its `backend_health`
    event; a healthy one ends it)."""
    down: dict[str, float] = {}
    health = {id(e): e for e in events if e.get("kind") == "backend_health" and e.get("backend")}
    for at, e in _timed(health.values()):  # a pool's events are in each of its lbs' lists
        key = f"{e.get('pool')}/{e['backend']}"
        if str(e.get("new")) == "unhealthy":
            down.setdefault(key, at)
        else:
            down.pop(key, None)
    return down


def since_text(at: float | None, now: float) -> str:
    """`since 2026-12-02 13:50:02Z (for 3 min)`; without an event in the last 24 h, said."""
    if at is None:
        return "since before the last 24 h of events"
    return f"since {utc(at)} (for {_duration(now - at)})"


def _duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < DAY_S:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86_400} d {s % 86_400 // 3600} h"


def _outage_since(
    lb: Mapping[str, Any], facts: list[RegionFact], events: Iterable[Mapping[str, Any]]
) -> tuple[bool, float | None]:
    """(is this load balancer in a probe-driven outage, since when — None: not in the
    events kept)."""
    out = [f.region for f in facts if f.state in ("failover", "fail_open")]
    if not out:
        return False, None
    left = regions_off_since(lb["name"], events)
    known = [left[r] for r in out if r in left]
    return True, (min(known) if len(known) == len(out) else None)


def banner_since(
    doc: Mapping[str, Any], events_by_lb: Mapping[str, list[Mapping[str, Any]]], now: float
) -> str:
    """When the outage on this page began: the earliest of its load balancers' probe-driven
    failovers and of its backends found down by probes."""
    overrides = {(o["kind"], o["target"]): o for o in doc.get("overrides_active", ())}
    starts: list[float | None] = []
    for lb in doc["load_balancers"]:
        events = events_by_lb.get(lb["name"], [])
        out, at = _outage_since(lb, region_facts(lb, _cause(lb, overrides, now)), events)
        if out:
            starts.append(at)
    seen = [e for events in events_by_lb.values() for e in events]
    down = backends_down_since([*seen, *doc.get("events", ())])
    for pool in doc["pools"]:
        for b in pool["backends"]:
            if b.get("probed") == "unhealthy" and b.get("override") is None:
                starts.append(down.get(f"{pool['name']}/{b['name']}"))
    if not starts:
        return ""
    known = [at for at in starts if at is not None]
    return since_text(min(known) if len(known) == len(starts) else None, now)


def banner(
    doc: Mapping[str, Any], events_by_lb: Mapping[str, list[Mapping[str, Any]]], now: float
) -> str:
    s = doc.get("summary") or {}
    overrides = doc.get("overrides_active", ())
    down = s.get("backends_down", 0)
    failed = s.get("regions_failed_over", 0)
    manual = s.get("overrides_active", 0)
    if down or (failed and not manual):
        level, headline = "outage", "Outage"
    elif failed or manual or s.get("backends_overridden_down") or s.get("backends_drained"):
        level, headline = "manual", "Overrides in force"
    else:
        level, headline = "ok", "All healthy: every region on its first choice"
    facts = [
        ("backends-down", "outage" if down else "", down,
         f"backend{'s' * (down != 1)} down by probes, of {s.get('backends', 0)}"),
        ("backends-overridden", "manual" if s.get("backends_overridden_down") else "",
         s.get("backends_overridden_down", 0), "down by override"),
        ("backends-drained", "manual" if s.get("backends_drained") else "",
         s.get("backends_drained", 0), "drained"),
        ("regions-failed-over", ("manual" if manual else "outage") if failed else "",
         failed, f"region{'s' * (failed != 1)} failed over, in "
         f"{s.get('load_balancers_failed_over', 0)} of {s.get('load_balancers', 0)} "
         "load balancers"),
        ("overrides", "manual" if manual else "", manual,
         f"override{'s' * (manual != 1)} active"),
        ("generation", "", doc["config"]["generation"], "config generation"),
    ]  # fmt: skip
    items = "".join(
        f'<li class="fact {cls}" data-fact="{key}"><b>{esc(n)}</b> {esc(text)}</li>'
        for key, cls, n, text in facts
    )
    lost = sum(b.get("quorum") == "degraded" for p in doc["pools"] for b in p["backends"])
    if lost:  # counted over this page's pools (a lost node usually takes every backend's)
        items += (
            f'<li class="fact warn" data-fact="quorum-lost"><b>{lost}</b> '
            f"backend{'s' * (lost != 1)} of the pools shown without a probe quorum</li>"
        )
    node = doc["node"]
    items += f'<li class="fact" data-fact="node">node <b>{esc(node.get("name") or "-")}</b></li>'
    listed = "".join(
        f'<li class="override-item" data-override="{esc(o["kind"] + ":" + o["target"])}">'
        f'<span class="tag manual">override</span> {esc(override_text(o, now))}</li>'
        for o in overrides
    )
    if lost and level == "ok":  # green would hide that the verdicts are held or thinner
        level, headline = "warn", "Probe quorum lost: verdicts held or from fewer sources"
    since = banner_since(doc, events_by_lb, now) if level == "outage" else ""
    if since:
        headline += f" {since}"
    return (
        f'<section id="banner" class="banner {level}" data-level="{level}">'
        f'<p class="headline">{esc(headline)}</p><ul class="facts">{items}</ul>'
        + (f'<ul class="overrides">{listed}</ul>' if listed else "")
        + f'<p class="meta" id="meta">{esc(meta_line(doc, now))}</p></section>'
    )


def meta_line(doc: Mapping[str, Any], now: float) -> str:
    node, bus = doc["node"], doc.get("bus")
    parts = [
        f"node {node.get('name') or '-'}",
        f"region {node.get('pop_region') or '-'}",
        f"config generation {doc['config']['generation']}"
        f" loaded {utc(doc['config'].get('loaded_at'))}",
        f"health generation {doc['health_generation']}",
        "ready" if doc.get("ready") else "NOT READY",
    ]
    if bus:
        parts.append("redis " + ("connected" if bus.get("connected") else "DISCONNECTED"))
        if not bus.get("authenticated", True):
            parts.append("INSECURE BUS (no cluster key)")
        sync = bus.get("config_sync") or {}
        if sync.get("state") == "diverged":  # serving a config the cluster does not
            parts.append(f"CONFIG DIVERGED: {sync.get('diverged')}")
    for zone, keys in (doc.get("dnssec") or {}).items():
        keys_text = ", ".join(f"{k['role']} {k['tag']} {k['state']}" for k in keys)
        parts.append(f"DNSSEC {zone} {keys_text}")
    parts.append(f"version {doc.get('version', '?')} · updated {utc(now)}")
    return " · ".join(parts)


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


# -- load balancers -----------------------------------------------------------------------
def _cause(
    lb: Mapping[str, Any], overrides: Mapping[tuple[str, str], Mapping[str, Any]], now: float
) -> Any:
    """Why a region left `first`: an override on that entry (pool, its backends, a nested
    load balancer) or on this load balancer's trickle — else an outage."""

    def cause(first: str | None) -> tuple[bool, str]:
        found = []
        trickle = overrides.get(("load_balancer", lb["name"]))
        if trickle is not None and trickle.get("trickle_ratio") == 1.0:
            found.append(trickle)
        if first and first.startswith("lb:"):
            nested = overrides.get(("load_balancer", first[3:]))
            found += [nested] if nested is not None else []
        elif first:
            found += [o for (kind, target), o in overrides.items()
                      if (kind == "pool" and target == first)
                      or (kind == "backend" and target.startswith(first + "/")
                          and o.get("state") in ("down", "drain"))]  # fmt: skip
        if found:
            return True, "; ".join(override_text(o, now) for o in found)
        return False, f"outage: {first or 'the first choice'} cannot answer"

    return cause


def lb_section(
    lb: Mapping[str, Any],
    index: int,
    overrides: Mapping[tuple[str, str], Mapping[str, Any]],
    colours: Mapping[str, str],
    events: list[Mapping[str, Any]],
    now: float,
) -> str:
    name = lb["name"]
    facts = region_facts(lb, _cause(lb, overrides, now))
    off = [f for f in facts if f.state != "first"]
    level = (
        "outage"
        if any(f.state in ("failover", "fail_open") for f in off)
        else "manual"
        if off
        else "ok"
    )
    names = lb.get("names") or []
    total_names = lb.get("names_total", len(names))
    shown = ", ".join(names[:NAMES_SHOWN]) + (
        f" and {total_names - NAMES_SHOWN} more" if total_names > NAMES_SHOWN else ""
    )
    heading = (
        f'<span class="dns">{esc(shown)}</span>'
        if names
        else '<span class="dns none">no DNS name points here (nested or unused)</span>'
    )
    trickle = lb.get("trickle_ratio")
    trickle_html = esc(f"trickle {trickle}")
    if lb.get("trickle_override") is not None:
        trickle_html = f'<span class="tag manual">override</span> {trickle_html}'
    pools_text = ", ".join(lb.get("default_pools", ())) + (
        f" · fallback {lb['fallback_pool']}" if lb.get("fallback_pool") else ""
    )
    if off:
        moved: dict[tuple[str, str, str], list[str]] = {}
        for f in off:
            moved.setdefault((f.pool, f.state, f.why), []).append(f.region)
        lines = []
        for (pool, state, why), regions in moved.items():
            cls = "manual" if state == "manual" else "outage"
            lines.append(
                f'<li class="{cls}">{esc(", ".join(regions))} → {esc(pool)}: '
                f"{esc('failed over' if state != 'fail_open' else 'fail open')} — {esc(why)}</li>"
            )
        status = f'<ul class="lb-status">{"".join(lines)}</ul>'
    else:
        first = facts[0].pool if facts else "-"
        status = f'<p class="lb-status ok">every region on its first choice ({esc(first)})</p>'
    title = f"Region map of {name}: " + (
        "; ".join(f"{f.region} {f.pool} ({f.state})" for f in off)
        if off
        else "every region on its first choice"
    )
    window = (
        f"{name}: health, failovers and overrides, {utc(now - DAY_S, False)} to {utc(now, False)}"
    )
    names_all = (
        f'<p class="meta names-all">DNS names ({total_names}): {esc(", ".join(names))}'
        + (" …" if total_names > len(names) else "")
        + "</p>"
        if total_names > NAMES_SHOWN
        else ""
    )
    recent = "".join(
        f"<li><time>{esc(utc(parse_utc(e.get('time'))))}</time> {esc(describe(e))}</li>"
        for e in list(reversed(events))[:20]
    )
    out, since = _outage_since(lb, facts, events)
    since_html = (
        f' <span class="since outage">outage {esc(since_text(since, now))}</span>' if out else ""
    )
    return (
        f'<section class="lb {level}" data-lb="{esc(name)}" data-failed="{len(off)}">'
        f'<h3>{heading} <span class="lbname">load balancer <code>{esc(name)}</code></span>'
        f"{since_html}</h3>"
        f'<p class="meta">policy {esc(lb.get("policy"))} · ttl {esc(lb.get("ttl"))}s · '
        f"{trickle_html} · pools {esc(pools_text)}</p>{status}"
        f'<div class="lb-grid"><figure class="map">'
        f"{region_map_svg(title, facts, colours, f'map-{index}')}"
        f"<figcaption>{legend_html(colours, lb, facts)}</figcaption></figure>"
        f'<figure class="tl">{timeline_svg(events, now - DAY_S, now, window)}'
        f"<figcaption>last 24 h, UTC: {len(events)} event{'s' * (len(events) != 1)}"
        f"</figcaption></figure></div>"
        f'<details data-key="{esc("regions:" + name)}"><summary>regions as text'
        f"{esc(f' ({len(off)} off their first choice)' if off else '')}</summary>"
        f"{region_table_html(facts)}{names_all}"
        f'<ul class="events">{recent or "<li class=meta>no events in the last 24 h</li>"}</ul>'
        f"</details></section>"
    )


# -- pools --------------------------------------------------------------------------------
def backend_state(b: Mapping[str, Any]) -> tuple[str, str]:
    """(text, css class): an override is said as such, never as an outage."""
    override = b.get("override")
    probed = b.get("probed")
    if override in ("down", "drain", "up"):
        return f"{override} (override) · probes: {probed}", "st-manual"
    if not b.get("enabled", True):
        return "disabled in config", "st-manual"
    if b.get("healthy"):
        return ("healthy (no monitor)" if probed == "unmonitored" else "healthy"), "healthy"
    return "unhealthy", "unhealthy"


def quorum_text(b: Mapping[str, Any], now: float) -> str:
    """A backend with fewer fresh probe sources than its quorum (docs/health.md "Lost
    quorum"): since when, how many are fresh, and whether its verdict is held or decided by
    the fresh sources. "" when its quorum is whole."""
    if b.get("quorum") != "degraded":
        return ""
    verdict = {
        "held": "verdict held",
        "fresh": "verdict decided by the fresh sources",
    }.get(str(b.get("quorum_verdict")), f"verdict {b.get('quorum_verdict')}")
    since = parse_utc(b.get("quorum_since"))
    fresh = f"{b.get('sources_fresh', '?')} of {len(b.get('sources') or ())} sources fresh"
    when = f" since {utc(since)} (for {_duration(now - since)})" if since is not None else ""
    return f"quorum lost{when}: {fresh}, {verdict}"


def pools_table(pools: list[Mapping[str, Any]], overrides: Mapping[Any, Any], now: float) -> str:
    if not pools:
        return '<p class="meta">no pool matches</p>'
    sources = sorted({s for p in pools for b in p["backends"] for s in b["sources"]})
    rows = []
    for pool in pools:
        healthy = pool["healthy"]
        ovr = overrides.get(("pool", pool["name"]))
        if pool.get("override"):  # said as an override, never as a failure
            who = (
                f" — {ovr.get('reason') or 'no reason'} — by {ovr.get('actor') or '?'}"
                if ovr
                else ""
            )
            badge = f'<span class="tag manual">{esc(pool["override"])} (override){esc(who)}</span>'
        else:
            state = "healthy" if healthy else "unhealthy"
            badge = f'<span class="badge {state}">{state}</span>'
        info = (
            f"monitor {pool.get('monitor') or 'none'} · region {pool.get('region') or '-'} · "
            f"minimum {pool.get('minimum_origins')}"
        )
        rows.append(
            f'<tr class="pool-head" data-pool="{esc(pool["name"])}" '
            f'data-state="{"healthy" if healthy else "unhealthy"}">'
            f'<th colspan="{5 + len(sources)}"><span class="pname">{esc(pool["name"])}</span> '
            f'{badge} <span class="meta">{esc(info)}</span></th></tr>'
        )
        for b in pool["backends"]:
            text, cls = backend_state(b)
            key = f"{pool['name']}/{b['name']}"
            o = overrides.get(("backend", key))
            if o is not None:
                text += f" — {o.get('reason') or 'no reason'} — by {o.get('actor') or '?'}"
            quorum = quorum_text(b, now)
            quorum_html = (
                f' <span class="tag quorum" data-quorum="{esc(b.get("quorum_verdict"))}">'
                f"{esc(quorum)}</span>"
                if quorum
                else ""
            )
            cells = "".join(_source_cell(b["sources"].get(s)) for s in sources)
            row = attrs(
                data_backend=key,
                data_state="healthy" if b.get("healthy") else "unhealthy",
                data_override=b.get("override"),
                data_quorum="degraded" if quorum else None,
                class_="override" if b.get("override") else None,
            )
            rows.append(
                f"<tr{row}>"
                f'<td class="name">{esc(b["name"])}</td><td class="name">{esc(b["address"])}</td>'
                f"<td>{esc(b.get('zone') or '-')}</td>"
                f'<td>{esc(b["role"])}</td><td class="state {cls}">{esc(text)}{quorum_html}</td>'
                f"{cells}</tr>"
            )
    head = "".join(f"<th>probe {esc(s)}</th>" for s in sources)
    return (
        '<div class="scroll"><table id="grid"><thead><tr><th>backend</th><th>address</th>'
        f"<th>zone</th><th>role</th><th>state</th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _source_cell(src: Mapping[str, Any] | None) -> str:
    if src is None:
        return '<td class="meta">-</td>'
    state = src["state"]
    text = f"stale (was {src.get('last_state')})" if state == "stale" else state
    rtt = "" if src.get("rtt_ms") is None else f"{src['rtt_ms']:.1f} ms"
    error = (
        f'<div class="rtt">{esc(shorten(src["last_error"], 200))}</div>'
        if src.get("last_error")
        else ""
    )
    return (
        f'<td class="{esc(state)}"><span class="state">{esc(text)}</span> '
        f'<span class="rtt">{esc(rtt)}</span>{error}</td>'
    )


def events_list(events: Any) -> str:
    items = "".join(
        f'<li data-kind="{esc(e["kind"])}"><time>{esc(utc(parse_utc(e.get("time"))))}</time> '
        f"{esc(describe(e))}</li>"
        for e in events
    )
    return f'<ul class="events" id="events">{items or "<li class=meta>no events yet</li>"}</ul>'
