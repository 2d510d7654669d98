"""The admin HTTP app (aiohttp): health, metrics, status, explain, reload, overrides.

Writes need `Authorization: Bearer TOKEN`; without a configured token every write is
refused. What a request must pass first (Host, token, JSON) is in `gate.py`. Errors are
JSON `{"error": ...}` with 400/401/403/404/405/413/421/429/503, never a traceback. Request
bodies are limited to 64 KiB. The app shares the server's snapshot holder and health store
and does no work on the DNS path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from dnsd.admin import config_api
from dnsd.admin.audit import AuditLog, AuditUnavailable
from dnsd.admin.context import (
    AUDIT,
    GATE,
    HOSTS,
    SERVER,
    audit_refusal,
    audited,
    authorize,
    release_reserved,
    reserve,
)
from dnsd.admin.control import ServerControl
from dnsd.admin.gate import (
    BadRequest,
    Token,
    TokenGate,
    allowed_hosts,
    error,
    host_allowed,
    json_object,
)
from dnsd.admin.metrics import CONTENT_TYPE
from dnsd.admin.openapi import openapi_document
from dnsd.admin.override_meta import META_FIELDS, active_overrides, iso, override_meta
from dnsd.admin.status import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Page,
    status_document,
)
from dnsd.admin.status_page import (
    ALL_HEADERS,
    HTML_HEADERS,
    PAGE_LIMIT,
    render_live,
    render_page,
)
from dnsd.events import KINDS, acting_as, events_for, parse_iso
from dnsd.explain import ExplainError, explain_query
from dnsd.health.overrides import OverrideMeta
from dnsd.health.store import OverrideError, PersistError
from dnsd.ratelog import RateLimitedLog

ERROR_LOG = RateLimitedLog(logging.getLogger("dnsd.admin"))
MAX_BODY = 64 * 1024
# [key, status document, its JSON bytes, {(fragment, refresh): page HTML}]
STATUS_CACHE: web.AppKey[list[Any]] = web.AppKey("status_cache")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await _answer(request, handler)
        await audit_refusal(request, response)
    finally:
        release_reserved(request)  # room reserved for an entry never written
    response.headers.update(ALL_HEADERS)  # errors and JSON too (docs/api.md, headers)
    if response.content_type == "text/html":
        response.headers.update(HTML_HEADERS)
    return response


async def _answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not host_allowed(request.headers.get("Host"), request.app[HOSTS]):
        return error(421, "unknown Host: use an address, localhost or this machine's name")
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error(exc.status, exc.reason)
    except BadRequest as exc:
        return error(400, str(exc))
    except Exception:  # a bug: one 500, a bounded amount of log
        ERROR_LOG.log(
            time.time(),
            logging.ERROR,
            "admin %s %s failed",
            request.method,
            request.path[:200],
            exc_info=True,
        )
        return error(500, "internal error (logged)")


def build_app(
    server: ServerControl,
    tokens: tuple[Token, ...],
    bind_host: str | None = None,
    audit: AuditLog | None = None,
) -> web.Application:
    app = web.Application(middlewares=[json_errors], client_max_size=MAX_BODY)
    app[SERVER] = server
    app[GATE] = TokenGate(tokens)
    app[AUDIT] = audit or AuditLog(None)
    app[HOSTS] = allowed_hosts(bind_host)
    app[STATUS_CACHE] = [None, {}, None, {}]
    r = app.router
    r.add_get("/", status_page)
    r.add_get("/healthz", healthz)
    r.add_get("/readyz", readyz)
    r.add_get("/metrics", metrics)
    r.add_get("/api/v1/status", status)
    r.add_get("/api/v1/explain", explain)
    r.add_get("/api/v1/openapi.json", openapi)
    r.add_post("/api/v1/reload", reload)
    r.add_get("/api/v1/audit", audit_entries)
    r.add_get("/api/v1/events", events)
    r.add_get("/api/v1/overrides", overrides)
    r.add_put("/api/v1/overrides/backends/{pool}/{backend}", backend_override)
    r.add_delete("/api/v1/overrides/backends/{pool}/{backend}", backend_override)
    r.add_put("/api/v1/overrides/pools/{pool}", pool_override)
    r.add_delete("/api/v1/overrides/pools/{pool}", pool_override)
    r.add_put("/api/v1/overrides/load_balancers/{lb}", lb_override)
    r.add_delete("/api/v1/overrides/load_balancers/{lb}", lb_override)
    config_api.add_routes(r)
    app.cleanup_ctx.append(_flush_suppressed)
    return app


async def _flush_suppressed(app: web.Application) -> AsyncIterator[None]:
    """Once a second: the counts of audit entries a budget held back, as lines."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(1.0)
            for line in app[AUDIT].pending_suppressed():
                await asyncio.to_thread(app[AUDIT].append_or_log, line)

    task = asyncio.create_task(loop(), name="audit suppressed")
    yield
    task.cancel()
    for line in app[AUDIT].pending_suppressed():
        app[AUDIT].append_or_log(line)


# -- reads ---------------------------------------------------------------------------------
async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    body = {"ready": server.ready, "generation": server.holder.current.generation}
    return web.json_response(body, status=200 if server.ready else 503)


async def metrics(request: web.Request) -> web.Response:
    body = request.app[SERVER].metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def _page(request: web.Request, default_limit: int) -> Page | web.Response:
    q = request.query
    try:
        limit = int(q.get("limit") or default_limit)
        offset = int(q.get("offset") or 0)
    except ValueError:
        return error(400, "limit and offset are whole numbers")
    if not (1 <= limit <= MAX_LIMIT and offset >= 0):
        return error(400, f"limit is 1 to {MAX_LIMIT}, offset 0 or more")
    lb, pool = q.get("lb", ""), q.get("pool", "")
    if len(lb) > 253 or len(pool) > 253:
        return error(400, "lb and pool are names of at most 253 characters")
    return Page(lb=lb, pool=pool, limit=limit, offset=offset)


def _status(request: web.Request, page: Page) -> tuple[dict[str, Any], float]:
    """The status document of one page — one computation for `/api/v1/status` and the
    status page — at most twice a second for one page, config and health generation: a
    client polling it in a loop must not take the event loop from everyone else."""
    server, now = request.app[SERVER], time.time()
    key = (
        server.holder.current.generation,
        server.store.view.generation,
        server.store.events.added,
        int(now * 2),
        page,
    )
    cached = request.app[STATUS_CACHE]
    if cached[0] != key:
        cached[:] = [key, status_document(server, now, page=page), None, {}]
    return cached[1], now


async def status(request: web.Request) -> web.Response:
    """The status document for the page asked for (docs/api.md, `GET /api/v1/status`)."""
    page = _page(request, DEFAULT_LIMIT)
    if isinstance(page, web.Response):
        return page
    doc, _ = _status(request, page)
    cached = request.app[STATUS_CACHE]
    if cached[2] is None:
        cached[2] = json.dumps(doc).encode()
    return web.Response(body=cached[2], content_type="application/json")


async def explain(request: web.Request) -> web.Response:
    q = request.query
    if not q.get("name"):
        return error(400, "the name parameter is required")
    server = request.app[SERVER]
    try:
        info = explain_query(
            server.holder.current,
            server.store.view,
            q["name"],
            q.get("type", "A").upper(),
            q.get("client", request.remote or "127.0.0.1"),
            q.get("ecs") or None,
            random.Random(),
            time.time(),
        )
    except (ExplainError, ValueError) as exc:
        return error(400, str(exc)[:300])
    except Exception:  # dnslib rejects odd names and types in many ways: the input's fault
        return error(400, "cannot explain that name, type, client or ecs")
    return web.json_response(info)


EVENT_PARAMS = frozenset({"since", "until", "kind", "lb", "limit"})
DEFAULT_EVENTS = 1000
DAY_S = 86_400.0  # what the status page's timelines show
MAX_EVENTS = 10_000


async def events(request: web.Request) -> web.Response:
    """GET /api/v1/events?since=ISO8601&until=&kind=&lb=&limit= — the newest `limit`
    matching events (default 1,000, at most 10,000), oldest first; `truncated` says
    whether older ones matched too. `kind` takes several kinds separated by commas."""
    q = request.query
    unknown = sorted(set(q) - EVENT_PARAMS)
    if unknown:
        return error(400, f"unknown parameter {unknown[0]!r}: use since, until, kind, lb, limit")
    times: dict[str, float | None] = {}
    for name in ("since", "until"):
        # A `+` in a query string arrives as a space (`+00:00` not percent-encoded).
        value = q.get(name, "").strip().replace(" ", "+")
        try:
            times[name] = parse_iso(value) if value else None
        except ValueError:
            return error(400, f"{name}: an ISO 8601 time, e.g. 2026-12-01T10:00:00Z")
    kinds = {k.strip() for k in q.get("kind", "").split(",") if k.strip()}
    bad = sorted(kinds - set(KINDS))
    if bad:
        return error(400, f"kind: unknown kind {bad[0]!r}; kinds are {', '.join(KINDS)}")
    lb = q.get("lb") or None
    if lb is not None and len(lb) > 253:
        return error(400, "lb: a load balancer name of at most 253 characters")
    try:
        limit = int(q.get("limit", DEFAULT_EVENTS))
    except ValueError:
        return error(400, "limit: a whole number")
    if not 1 <= limit <= MAX_EVENTS:
        return error(400, f"limit: 1 to {MAX_EVENTS}")
    found, more = request.app[SERVER].store.events.select(
        times["since"], times["until"], kinds, lb, limit
    )
    return web.json_response({"events": [e.to_json() for e in found], "truncated": more})


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


async def status_page(request: web.Request) -> web.Response:
    """The status page, rendered here from the status document (complete without
    JavaScript); `?fragment=1` is the part its script fetches again every `refresh` ms."""
    page = _page(request, PAGE_LIMIT)
    if isinstance(page, web.Response):
        return page
    try:
        refresh_ms = min(max(int(request.query.get("refresh") or 1000), 200), 3_600_000)
    except ValueError:
        return error(400, "refresh is a whole number of milliseconds")
    fragment = request.query.get("fragment") == "1"
    doc, now = _status(request, page)
    query = {k: request.query.get(k, "") for k in ("lb", "pool", "limit")}
    rendered = request.app[STATUS_CACHE][3]
    key = (fragment, refresh_ms, *query.values())
    html = rendered.get(key)
    if html is None:
        events = timeline_events(request.app[SERVER], doc)
        html = (
            render_live(doc, events, query, now)
            if fragment
            else render_page(doc, events, query, now, refresh_ms)
        )
        rendered[key] = html
    response = web.Response(text=html, content_type="text/html")
    response.headers["Cache-Control"] = "no-store"
    response.enable_compression()  # a page of 20 maps and timelines: ~100 KB, ~10 KB gzipped
    return response


def timeline_events(server: ServerControl, doc: dict[str, Any]) -> dict[str, list[Any]]:
    """Per load balancer on the page, its events of the last day for the timeline
    (`dnsd.events.events_for` over the event journal)."""
    snap, now = server.holder.current, time.time()
    config = snap.config
    day = server.store.events.select(since=now - DAY_S, until=now, limit=MAX_EVENTS)[0]
    out: dict[str, list[Any]] = {}
    for entry in doc["load_balancers"]:
        lb = config.load_balancers.get(entry["name"])
        if lb is None:
            continue
        lbs, pools = snap.lb_graph.tree(lb.name), snap.lb_graph.reach(lb.name).pools
        out[lb.name] = events_for(day, lb.name, now - DAY_S, now, pools, lbs)
    return out


# -- writes --------------------------------------------------------------------------------
async def audit_entries(request: web.Request) -> web.Response:
    """GET /api/v1/audit?since=ISO8601 — needs a token (it names tokens and sources)."""
    token = authorize(request, "read")
    if isinstance(token, web.Response):
        return token
    since = request.query.get("since")
    try:
        when = datetime.fromisoformat(since) if since else None
    except ValueError:
        return error(400, "since: an ISO 8601 time, e.g. 2026-12-01T10:00:00+00:00")
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    entries = await asyncio.to_thread(request.app[AUDIT].since, when)
    return web.json_response({"entries": entries})


async def reload(request: web.Request) -> web.Response:
    token = authorize(request, "admin")
    if isinstance(token, web.Response):
        return token
    before = request.app[SERVER].holder.current.generation
    try:  # an applied reload must be audited: no room for its entry, no reload
        await reserve(request, {"generation": before}, {"generation": before})
    except AuditUnavailable as exc:
        return await audited(
            request,
            token,
            None,
            None,
            error(503, f"reload refused: {exc.strerror}; the old config keeps serving"),
        )
    with acting_as(token.name, "reload"):
        result = await request.app[SERVER].reload()
    if not result.ok:
        response = web.json_response(
            {"error": "reload failed: the old config keeps serving", "errors": result.errors},
            status=400,
        )
    else:
        response = web.json_response(
            {
                "generation": result.generation,
                "warnings": result.errors,
                "restart_needed": result.restart_needed,
            }
        )
    return await audited(
        request, token, {"generation": before}, {"generation": result.generation}, response
    )


async def overrides(request: web.Request) -> web.Response:
    """GET /api/v1/overrides — the active ones, with actor, reason, since and expires (it
    names tokens, so it needs one)."""
    token = authorize(request, "read")
    if isinstance(token, web.Response):
        return token
    return web.json_response({"overrides": active_overrides(request.app[SERVER].store.overrides)})


async def backend_override(request: web.Request) -> web.Response:
    pool, backend = request.match_info["pool"], request.match_info["backend"]
    return await _override(
        request,
        {"state"},
        lambda store, v, m: store.set_backend_override(pool, backend, v, m),
        "state",
    )


async def pool_override(request: web.Request) -> web.Response:
    pool = request.match_info["pool"]
    return await _override(
        request, {"state"}, lambda store, v, m: store.set_pool_override(pool, v, m), "state"
    )


async def lb_override(request: web.Request) -> web.Response:
    lb = request.match_info["lb"]
    return await _override(
        request,
        {"trickle_ratio"},
        lambda store, v, m: store.set_trickle_override(lb, v, m),
        "trickle_ratio",
    )


async def _override(
    request: web.Request,
    allowed: set[str],
    apply: Callable[[Any, Any, OverrideMeta | None], None],
    field: str,
) -> web.Response:
    token = authorize(request, "override")
    if isinstance(token, web.Response):
        return token
    value = None
    meta: OverrideMeta | None = None
    if request.method == "PUT":
        body = await json_object(request, allowed | META_FIELDS)
        # `for` counts from the clock the store expires overrides on (the cluster's)
        meta = override_meta(body, token.name, request.app[SERVER].store.now())
        if body.get(field) is None:
            return error(400, f'the body needs "{field}" (DELETE removes an override)')
        value = body[field]
        if field == "state" and not isinstance(value, str):
            return error(400, "state must be a string")
        if field == "trickle_ratio" and (
            isinstance(value, bool) or not isinstance(value, int | float)
        ):
            return error(400, "trickle_ratio must be a number from 0.0 to 1.0")
        if field == "trickle_ratio":
            value = float(value)
    store = request.app[SERVER].store
    before = store.overrides_document()
    try:  # room for its entry first (after: at most `before` and the body more)
        await reserve(request, before, before, value, meta and meta.reason)
    except AuditUnavailable as exc:
        return await audited(
            request,
            token,
            before,
            before,
            error(503, f"{exc.strerror}: the override was not applied"),
        )
    try:
        with acting_as(token.name):
            apply(store, value, meta)
    except KeyError as exc:
        response = error(404, str(exc.args[0]))
    except OverrideError as exc:
        response = error(400, str(exc))
    except PersistError as exc:
        response = error(503, str(exc))
    else:
        extra = {"expires": iso(meta.expires)} if meta is not None and meta.expires else {}
        response = web.json_response(
            {"ok": True, field: value, "health_generation": store.view.generation, **extra}
        )
    return await audited(request, token, before, store.overrides_document(), response)
