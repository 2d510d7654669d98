"""The status page's pools table: each backend's state, probe sources and quorum."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dnsd.admin.html import attrs, esc, parse_utc, shorten, utc
from dnsd.admin.status_since import duration


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
    when = f" since {utc(since)} (for {duration(now - since)})" if since is not None else ""
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
