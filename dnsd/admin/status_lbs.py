"""The status page's load balancer sections: the pool answering each client region now,
why, since when, on a map, a table and a day's timeline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dnsd.admin.html import esc, parse_utc, utc
from dnsd.admin.region_map import legend_html, region_facts, region_map_svg, region_table_html
from dnsd.admin.status_since import DAY_S, outage_since, override_text, since_text
from dnsd.admin.timeline import describe, timeline_svg
from dnsd.config.pool_refs import nested_lb

NAMES_SHOWN = 5  # DNS names in a load balancer's heading; the rest in its details


def cause(
    lb: Mapping[str, Any], overrides: Mapping[tuple[str, str], Mapping[str, Any]], now: float
) -> Any:
    """Why a region left `first`: an override on that entry (pool, its backends, a nested
    load balancer) or on this load balancer's trickle — else an outage."""

    def cause(first: str | None) -> tuple[bool, str]:
        found = []
        trickle = overrides.get(("load_balancer", lb["name"]))
        if trickle is not None and trickle.get("trickle_ratio") == 1.0:
            found.append(trickle)
        if first and (inner := nested_lb(first)) is not None:
            nested = overrides.get(("load_balancer", inner))
            found += [nested] if nested is not None else []
        elif first:
            found += [
                o
                for (kind, target), o in overrides.items()
                if (kind == "pool" and target == first)
                or (
                    kind == "backend"
                    and target.startswith(first + "/")
                    and o.get("state") in ("down", "drain")
                )
            ]
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
    facts = region_facts(lb, cause(lb, overrides, now))
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
    out, since = outage_since(lb, facts, events)
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
