"""The OpenAPI 3 document of the admin API (served at /api/v1/openapi.json)."""

from __future__ import annotations

from typing import Any

from dnsd import __version__
from dnsd.admin.config_api import CONFIG_ROUTES, NO_DELETE
from dnsd.config import fields

JSON = {"application/json": {"schema": {"type": "object"}}}
ERR = {
    "description": "error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}
WRITE_ERRORS = {"400": ERR, "401": ERR, "403": ERR, "404": ERR}
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


def _override(name: str, body: dict[str, Any], params: list[str]) -> dict[str, Any]:
    parameters = [
        {"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params
    ]
    return {
        "put": {
            "summary": f"Set the {name} override",
            "security": BEARER,
            "parameters": parameters,
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": {"200": {"description": "set", "content": JSON}, **WRITE_ERRORS},
        },
        "delete": {
            "summary": f"Remove the {name} override",
            "security": BEARER,
            "parameters": parameters,
            "responses": {"200": {"description": "removed", "content": JSON}, **WRITE_ERRORS},
        },
    }


# Every override also takes why and until when (an expired override removes itself).
META = {
    "reason": {"type": "string", "maxLength": 200},
    "expires": {"type": "string", "format": "date-time"},
    "for": {"type": "string", "description": 'a duration: "30m", "2h"', "example": "30m"},
}


def state(*values: str) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["state"],
        "properties": {"state": {"type": "string", "enum": list(values)}, **META},
        "additionalProperties": False,
    }


def query(name: str, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": {"type": "string"}}


TRICKLE = {
    "type": "object",
    "required": ["trickle_ratio"],
    "properties": {"trickle_ratio": {"type": "number", "minimum": 0, "maximum": 1}, **META},
    "additionalProperties": False,
}


ETAG = {"ETag": {"schema": {"type": "string"}, "description": "content hash of the entry"}}
IF_MATCH = {"name": "If-Match", "in": "header", "required": False, "schema": {"type": "string"}}
CONFIG_ERRORS = {**WRITE_ERRORS, "412": {**ERR, "description": "If-Match is stale"}}


def _config_entry(what: str, body: dict[str, Any], params: list[str]) -> dict[str, Any]:
    """One config API route; the body schema comes from the checker's own field table."""
    parameters = [
        {"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params
    ]
    entry = {"content": {"application/json": {"schema": body}}, "headers": ETAG}
    return {
        "get": {
            "summary": f"Read {what} (the YAML entry as JSON)",
            "security": BEARER,
            "parameters": parameters,
            "responses": {"200": {"description": "the entry", **entry}, "404": ERR},
        },
        "put": {
            "summary": f"Create or replace {what}; the whole config is checked, written, reloaded",
            "security": BEARER,
            "parameters": [*parameters, IF_MATCH],
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": {
                "200": {"description": "replaced", "content": JSON, "headers": ETAG},
                "201": {"description": "created", "content": JSON, "headers": ETAG},
                **CONFIG_ERRORS,
            },
        },
        "delete": {
            "summary": f"Delete {what}",
            "security": BEARER,
            "parameters": [*parameters, IF_MATCH],
            "responses": {"200": {"description": "deleted", "content": JSON}, **CONFIG_ERRORS},
        },
    }


CHANGE_SET = {
    "type": "object",
    "required": ["changes"],
    "properties": {
        "changes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["route"],
                "properties": {
                    "method": {"type": "string", "enum": ["PUT", "DELETE"]},
                    "route": {"type": "string", "description": "e.g. pools/web"},
                    "body": {"type": "object"},
                    "if_match": {"type": "string"},
                },
            },
        }
    },
}


def config_paths() -> dict[str, Any]:
    paths: dict[str, Any] = {
        f"/api/v1/config/{route}": _config_entry(what, fields.schema(table), params)
        for route, what, table, params in CONFIG_ROUTES
    }
    for route in NO_DELETE:
        del paths[f"/api/v1/config/{route}"]["delete"]
    paths["/api/v1/config"] = {
        "get": {
            "summary": "Every zone's records, pools, monitors and load balancers",
            "security": BEARER,
            "responses": {"200": {"description": "the entries", "content": JSON}},
        }
    }
    paths["/api/v1/config/changes"] = {
        "post": {
            "summary": "Apply several changes together: all of them or none",
            "security": BEARER,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": CHANGE_SET}},
            },
            "responses": {"200": {"description": "applied", "content": JSON}, **CONFIG_ERRORS},
        }
    }
    return paths


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "dnsd admin API", "version": __version__},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": {"type": "object", "properties": {"error": {"type": "string"}}}},
        },
        "paths": {
            "/": {
                "get": {
                    "summary": "Status page for people (HTML)",
                    "responses": {"200": {"description": "HTML"}},
                }
            },
            "/healthz": {
                "get": {
                    "summary": "Liveness",
                    "responses": {"200": {"description": "alive", "content": JSON}},
                }
            },
            "/readyz": {
                "get": {
                    "summary": "Ready once the config is loaded and the first probes ran",
                    "responses": {
                        "200": {"description": "ready", "content": JSON},
                        "503": {"description": "not ready", "content": JSON},
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "responses": {"200": {"description": "text format"}},
                }
            },
            "/api/v1/status": {
                "get": {
                    "summary": "Pools, backends, health per source, RTT, events",
                    "responses": {"200": {"description": "status", "content": JSON}},
                }
            },
            "/api/v1/audit": {
                "get": {
                    "summary": "Admin writes since a time (STATE_DIR/audit.jsonl); a token of "
                    "any scope",
                    "parameters": [query("since")],
                    "responses": {
                        "200": {"description": "{entries: [...]}", "content": JSON},
                        "400": {"description": "since is not ISO 8601", "content": JSON},
                        "401": {"description": "no token", "content": JSON},
                    },
                }
            },
            "/api/v1/events": {
                "get": {
                    "summary": "Events (STATE_DIR/events.jsonl): time, kind, lb, pool, backend, "
                    "regions, cause, actor; the newest `limit` matching, oldest first",
                    "parameters": [
                        query("since"),
                        query("until"),
                        query("kind"),
                        query("lb"),
                        query("limit"),
                    ],
                    "responses": {
                        "200": {"description": "{events: [...], truncated}", "content": JSON},
                        "400": ERR,
                    },
                }
            },
            "/api/v1/explain": {
                "get": {
                    "summary": "Explain one query with live health (as dnsd explain --json)",
                    "parameters": [
                        query("name", True),
                        query("type"),
                        query("client"),
                        query("ecs"),
                    ],
                    "responses": {
                        "200": {"description": "explanation", "content": JSON},
                        "400": ERR,
                    },
                }
            },
            "/api/v1/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {"200": {"description": "OpenAPI", "content": JSON}},
                }
            },
            "/api/v1/reload": {
                "post": {
                    "summary": "Reload the configuration",
                    "security": BEARER,
                    "responses": {
                        "200": {"description": "new generation", "content": JSON},
                        "400": ERR,
                        "401": ERR,
                        "403": ERR,
                    },
                }
            },
            "/api/v1/overrides": {
                "get": {
                    "summary": "The active overrides with actor, reason, since and expires; a "
                    "token of any scope",
                    "security": BEARER,
                    "responses": {
                        "200": {"description": "{overrides: [...]}", "content": JSON},
                        "401": {"description": "no token", "content": JSON},
                    },
                }
            },
            "/api/v1/overrides/backends/{pool}/{backend}": _override(
                "backend", state("down", "up", "drain"), ["pool", "backend"]
            ),
            "/api/v1/overrides/pools/{pool}": _override("pool", state("down", "up"), ["pool"]),
            "/api/v1/overrides/load_balancers/{lb}": _override(
                "load balancer trickle", TRICKLE, ["lb"]
            ),
            **config_paths(),
        },
    }
