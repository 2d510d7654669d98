"""The config API: read and change entries of the configuration directory.

`GET|PUT|DELETE /api/v1/config/{pools/P, pools/P/backends/B, monitors/M,
load_balancers/L, zones/Z/records/NAME}` with the YAML entry as the JSON body, `GET|PUT
/api/v1/config/zones/Z` (a zone's settings; a PUT of a new zone creates its file); `GET
/api/v1/config` (everything, for octoDNS) and `POST /api/v1/config/changes` (several
changes, all or none). Reads need a token of any scope (monitors may carry credentials in
headers), writes the `admin` scope. Every response carries the entry's `ETag`; a write with
a stale `If-Match` gets 412; an invalid change gets 400 `{"error", "errors": [...]}` and
changes nothing (dnsd.provision). Every write, refused or not, is audited.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from dnsd.admin.audit import AuditUnavailable
from dnsd.admin.context import SERVER, audited, authorize, reserve
from dnsd.admin.gate import BadRequest, Token, error, json_object
from dnsd.config import fields
from dnsd.events import acting_as
from dnsd.provision.directory import Prepared
from dnsd.provision.edit import ChangeRefused
from dnsd.provision.reader import PAGE_MAX
from dnsd.provision.targets import BadTarget, Change, etag, parse_route
from dnsd.provision.writer import ConfigWriter

MAX_CHANGES = 1000  # in one POST /api/v1/config/changes
CHANGES_MAX_BODY = 4 << 20  # its body (every other request: 64 KiB)
METHODS = ("PUT", "DELETE")


# route under /api/v1/config/, what it names, the fields of its body, its parameters
CONFIG_ROUTES: tuple[tuple[str, str, fields.Fields, list[str]], ...] = (
    ("pools/{pool}", "a pool", fields.POOL, ["pool"]),
    ("pools/{pool}/backends/{backend}", "a backend of a pool", fields.BACKEND, ["pool", "backend"]),
    ("monitors/{name}", "a monitor", fields.MONITOR, ["name"]),
    ("load_balancers/{lb}", "a load balancer", fields.LOAD_BALANCER, ["lb"]),
    ("zones/{zone}", "a zone's settings (a new zone: its YAML file)", fields.ZONE, ["zone"]),
    ("zones/{zone}/records/{name}", "the records of one name", fields.RECORD, ["zone", "name"]),
)
NO_DELETE = ("zones/{zone}",)  # a zone goes with its file, by hand


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/api/v1/config", whole)
    router.add_post("/api/v1/config/changes", change_set)
    for route, *_ in CONFIG_ROUTES:
        for method in ("GET", *METHODS):
            if not (method == "DELETE" and route in NO_DELETE):
                router.add_route(method, f"/api/v1/config/{route}", one_entry)


def _writer(request: web.Request) -> ConfigWriter | web.Response:
    writer = request.app[SERVER].config_writer
    if writer is None:
        return error(503, "this process does not write the configuration")
    return writer


async def whole(request: web.Request) -> web.Response:
    token, writer = authorize(request, "read"), _writer(request)
    if isinstance(token, web.Response):
        return token
    if isinstance(writer, web.Response):
        return writer
    q = request.query
    try:
        offset, limit = int(q.get("offset", 0)), int(q.get("limit", PAGE_MAX))
    except ValueError:
        return error(400, "offset and limit: whole numbers")
    if offset < 0 or not 0 < limit <= PAGE_MAX:
        return error(400, f"offset >= 0 and limit from 1 to {PAGE_MAX}")
    zone = q["zone"].lower().rstrip(".") if q.get("zone") else None
    body = await _refused_as_response(writer.reader.page(zone, offset, limit))
    return web.Response(body=body, content_type="application/json")


async def _refused_as_response(coro: Any) -> Any:
    try:
        return await coro
    except ChangeRefused as exc:
        raise web.HTTPBadRequest(reason=str(exc)[:300]) from None


async def one_entry(request: web.Request) -> web.Response:
    scope = "read" if request.method == "GET" else "admin"
    token, writer = authorize(request, scope), _writer(request)
    if isinstance(token, web.Response):
        return token
    if isinstance(writer, web.Response):
        return writer
    try:
        pattern = request.match_info.route.resource.canonical  # type: ignore[union-attr]
        target = parse_route(pattern.removeprefix("/api/v1/config/").format(**request.match_info))
    except BadTarget as exc:
        return error(404, str(exc))
    if request.method == "GET":
        value = await _refused_as_response(writer.read(target))
        if value is None:
            return error(404, f"{target.route}: no such entry")
        return web.json_response(value, headers={"ETag": etag(value) or ""})
    body = await json_object(request, None) if request.method == "PUT" else None
    change = Change(target, body, request.headers.get("If-Match"))
    return await _apply(request, token, writer, [change])


async def change_set(request: web.Request) -> web.Response:
    """POST {"changes": [{"method": "PUT"|"DELETE", "route": R, "body": {...},
    "if_match": ETAG}, ...]}: applied together (one check, one reload) or not at all."""
    token, writer = authorize(request, "admin"), _writer(request)
    if isinstance(token, web.Response):
        return token
    if isinstance(writer, web.Response):
        return writer
    # The one route with a larger body cap: 1,000 changes do not fit in 64 KiB.
    request = request.clone(client_max_size=CHANGES_MAX_BODY)
    items = (await json_object(request, {"changes"})).get("changes")
    if not isinstance(items, list) or not 0 < len(items) <= MAX_CHANGES:
        raise BadRequest(f'"changes" must be a list of 1 to {MAX_CHANGES} changes')
    changes = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or set(item) - {"method", "route", "body", "if_match"}:
            raise BadRequest(f"changes[{i}]: an object with method, route, body, if_match")
        method = str(item.get("method", "PUT")).upper()
        body = item.get("body")
        if method not in METHODS or (method == "PUT") != isinstance(body, dict):
            raise BadRequest(f"changes[{i}]: PUT with an object body, or DELETE without one")
        if_match = item.get("if_match")
        if if_match is not None and not isinstance(if_match, str):
            raise BadRequest(f"changes[{i}].if_match: a string")
        try:
            target = parse_route(str(item.get("route", "")))
        except BadTarget as exc:
            raise BadRequest(f"changes[{i}]: {exc}") from None
        changes.append(Change(target, body, if_match))
    return await _apply(request, token, writer, changes, single=False)


async def _apply(
    request: web.Request,
    token: Token,
    writer: ConfigWriter,
    changes: list[Change],
    single: bool = True,
) -> web.Response:
    routes = ", ".join(
        f"{'DELETE' if c.body is None else 'PUT'} {c.target.route}" for c in changes[:5]
    )
    more = f" and {len(changes) - 5} more" if len(changes) > 5 else ""

    async def room_for_the_entry(prepared: Prepared) -> None:
        """An applied change must be audited: without room for its entry, none is made."""
        try:
            await reserve(request, prepared.before, prepared.after)
        except AuditUnavailable as exc:
            raise ChangeRefused(503, f"{exc.strerror}: nothing changed") from None

    try:
        with acting_as(token.name, f"config API: {routes}{more}"):
            applied = await writer.apply(changes, before_write=room_for_the_entry)
    except ChangeRefused as exc:
        response = web.json_response(
            {"error": str(exc), "errors": exc.errors[:200]}, status=exc.status
        )
        return await audited(request, token, None, None, response)
    prepared = applied.prepared
    body: dict[str, Any] = {"generation": applied.generation, "etags": prepared.etags}
    headers = {}
    status = 200
    if single:
        route = changes[0].target.route
        body["route"] = route
        if changes[0].body is not None:
            headers["ETag"] = prepared.etags[route] or ""
            status = 201 if route in prepared.created else 200
        else:
            body["deleted"] = True
    response = web.json_response(body, status=status, headers=headers)
    return await audited(request, token, prepared.before, prepared.after, response)
