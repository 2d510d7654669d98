"""The status page's banner: the level and headline, the counted facts, the overrides in
force, since when the outage runs, and the meta line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dnsd.admin.html import esc, utc
from dnsd.admin.region_map import region_facts
from dnsd.admin.status_lbs import cause
from dnsd.admin.status_since import backends_down_since, outage_since, override_text, since_text


def banner_since(
    doc: Mapping[str, Any], events_by_lb: Mapping[str, list[Mapping[str, Any]]], now: float
) -> str:
    """When the outage on this page began: the earliest of its load balancers' probe-driven
    failovers and of its backends found down by probes."""
    overrides = {(o["kind"], o["target"]): o for o in doc.get("overrides_active", ())}
    starts: list[float | None] = []
    for lb in doc["load_balancers"]:
        events = events_by_lb.get(lb["name"], [])
        out, at = outage_since(lb, region_facts(lb, cause(lb, overrides, now)), events)
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
        (
            "backends-down",
            "outage" if down else "",
            down,
            f"backend{'s' * (down != 1)} down by probes, of {s.get('backends', 0)}",
        ),
        (
            "backends-overridden",
            "manual" if s.get("backends_overridden_down") else "",
            s.get("backends_overridden_down", 0),
            "down by override",
        ),
        (
            "backends-drained",
            "manual" if s.get("backends_drained") else "",
            s.get("backends_drained", 0),
            "drained",
        ),
        (
            "regions-failed-over",
            ("manual" if manual else "outage") if failed else "",
            failed,
            f"region{'s' * (failed != 1)} failed over, in "
            f"{s.get('load_balancers_failed_over', 0)} of {s.get('load_balancers', 0)} "
            "load balancers",
        ),
        ("overrides", "manual" if manual else "", manual, f"override{'s' * (manual != 1)} active"),
        ("generation", "", doc["config"]["generation"], "config generation"),
    ]
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
