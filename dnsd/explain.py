"""`dnsd explain`: run one query through the real pipeline and show every decision.

The explanation is read off the same `answer_query` call that builds the answer, so the
two cannot disagree. Used by the CLI (offline, from a config directory, every backend healthy
unless `--down`) and by the admin API's `/api/v1/explain` (live health).
"""

from __future__ import annotations

import ipaddress
import random
from typing import Any

from dnslib import EDNS0, QTYPE, RCODE, DNSRecord, EDNSOption

from dnsd.config.model import Config
from dnsd.config.outage import budget_text, outage_budget
from dnsd.geo.ecs import ECS_OPTION
from dnsd.health.view import BackendHealth, HealthView, view_of
from dnsd.rdata import record_text
from dnsd.reply import Client
from dnsd.request import Request
from dnsd.resolve import answer_query
from dnsd.snapshot import Snapshot


class ExplainError(ValueError):
    pass


def ecs_option(prefix: str) -> EDNSOption:
    """`--ecs 81.2.69.0/24` → an ECS option as a resolver would send it."""
    try:
        net = ipaddress.ip_network(prefix, strict=False)
    except ValueError as exc:
        raise ExplainError(f"--ecs: {exc}") from None
    family = 1 if net.version == 4 else 2
    raw = net.network_address.packed[: (net.prefixlen + 7) // 8]
    return EDNSOption(ECS_OPTION, family.to_bytes(2, "big") + bytes([net.prefixlen, 0]) + raw)


def health_with_down(config: Config, down: list[str]) -> HealthView:
    """Every backend healthy except those named: `pool`, `pool/backend` or a backend name."""
    states: dict[tuple[str, str], bool | BackendHealth] = {}
    pools: dict[str, str] = {}
    for name in down:
        if name in config.pools:
            pools[name] = "down"
            continue
        pool_name, _, backend_name = name.rpartition("/")
        hits = [
            (p.name, b.name)
            for p in config.pools.values()
            for b in p.backends
            if b.name == backend_name and (not pool_name or p.name == pool_name)
        ]
        if not hits:
            raise ExplainError(f"--down {name}: no such pool or backend")
        states.update(dict.fromkeys(hits, False))
    return view_of(states, pools=pools)  # type: ignore[arg-type]


def explain_query(
    snap: Snapshot,
    health: HealthView,
    name: str,
    qtype: str = "A",
    client: str = "127.0.0.1",
    ecs: str | None = None,
    rng: random.Random | None = None,
    now: float = 0.0,
) -> dict[str, Any]:
    try:
        source = ipaddress.ip_address(client)
        query = DNSRecord.question(name, qtype)
    except ValueError as exc:
        raise ExplainError(str(exc)) from None
    if ecs:
        query.add_ar(EDNS0(udp_len=1232, opts=[ecs_option(ecs)]))
    request = Request(
        bytes(query.pack()), Client(source, "udp"), snap, health, rng or random.Random(), now
    )
    result = answer_query(query, request)
    reply = result.reply
    out: dict[str, Any] = {
        "name": name,
        "type": qtype,
        "rcode": RCODE.get(reply.header.rcode),
        "client": str(result.client.address) if result.client else str(source),
        "region": None,
        "country": None,
        "location_source": None,
        "client_network": None,
        "client_zone": None,
        "policy": None,
        "candidates": [],
        "pool": None,
        "eligible": [],
        "zonal_match": False,
        "modified_eligible": [],
        "answer": [
            str(rr.rdata) for rr in reply.rr if rr.rtype in (QTYPE.A, QTYPE.AAAA, QTYPE.CNAME)
        ],
        "ttl": reply.rr[-1].ttl if reply.rr else None,
        "ecs_scope": ecs_scope(reply),
        "records": [record_text(rr) for rr in reply.rr],
    }
    if result.client is not None:
        loc = result.client.location
        out.update(
            region=loc.region,
            country=loc.country,
            location_source=loc.source,
            client_network=loc.network,
            client_zone=result.client.zone,
        )
    if result.decision is not None:
        decision = result.decision.to_json()
        decision.pop("answer")
        out.update(decision)
        if decision.get("lb") in snap.config.load_balancers:
            out["outage_budget"] = outage_budget(snap.config, decision["lb"]).to_json()
    return out


def _located_by(info: dict[str, Any]) -> str:
    source = info["location_source"] or "not needed"
    return f"client_networks {info['client_network']}" if info["client_network"] else source


def ecs_scope(reply: DNSRecord) -> int | None:
    for rr in reply.ar:
        if rr.rtype == QTYPE.OPT:
            for opt in rr.rdata:
                if opt.code == ECS_OPTION:
                    return int(opt.data[3])
    return None


def _pool_lines(pools: list[dict[str, Any]], fail_open: bool) -> list[str]:
    lines = []
    for p in pools:
        rtt = f"  rtt {p['rtt_ms']:.1f} ms" if p["rtt_ms"] is not None else ""
        rank = f"{p['rank']}." if p["rank"] else "- "
        if p["answered"]:
            what = "ANSWERS (fail open: nothing healthy)" if fail_open else "ANSWERS"
        else:
            what = f"{'not used' if p['rank'] else 'skipped'}: {p['why_not']}"
        lines.append(f"  {rank} {p['pool']:<20} {what}{rtt}")
    return lines


def render_text(info: dict[str, Any]) -> str:
    lines = [
        f"query:    {info['name']} {info['type']} -> {info['rcode']}",
        f"client:   {info['client']}  region {info['region'] or '-'}  country {info['country'] or '-'}"
        f"  zone {info['client_zone'] or '-'}  ({_located_by(info)})",
    ]
    if info["policy"]:
        lines.append(f"policy:   {info['policy']}  (lb {info['lb']})")
        if info["client_region"] == "pop":
            lines.append("located:  client_region pop: the node's region steers every client")
        if info["rtt_source"]:
            lines.append(f"rtt from: {info['rtt_source']} (the vantage point that decided)")
        lines.append("pools:    in the order used; why each other one did not answer")
        lines.extend(_pool_lines(info["pools"], info["fail_open"]))
        lines.append(
            f"trickle:  ratio {info['trickle_ratio']}  primary {info['primary'] or '-'}"
            f"  backup {info['backup'] or '-'}  draw {info['trickle_draw']}"
        )
        lines.append(
            f"chosen:   {' -> '.join(info['path']) or '-'}"
            f"{'  (FAIL OPEN)' if info['fail_open'] else ''}"
        )
        if len(info.get("answer_pools") or ()) > 1:  # docs/steering.md, several pools per answer
            lines.append(f"answered: one address from each of {', '.join(info['answer_pools'])}")
        if info.get("when_all_down"):  # docs/steering.md, when all pools are down
            lines.append(f"all down: when_all_down {info['when_all_down']} answers")
        lines.append(f"eligible: {', '.join(info['eligible']) or '-'}  ({info['original_kind']})")
        lines.append(
            f"zonal match: {info['zonal_match']}  modified: {', '.join(info['modified_eligible']) or '-'}"
        )
        lines.append("why:")
        lines.extend(f"  {line}" for line in info["trail"])
        if info.get("outage_budget"):
            lines.append(
                f"outage:   worst case behind a cache {budget_text(info['outage_budget'])}"
            )
    lines.append(
        f"answer:   {', '.join(info['answer']) or '(none)'}  ttl {info['ttl']}  ecs scope {info['ecs_scope']}"
    )
    if info["type"] in ("HTTPS", "SVCB"):  # docs/steering.md, HTTPS and SVCB hints
        lines.extend(f"record:   {record}" for record in info["records"])
    return "\n".join(lines)
