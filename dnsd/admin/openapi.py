"""The OpenAPI 3 document of the admin API (served at /api/v1/openapi.json)."""

from __future__ import annotations

from typing import Any

from dnsd import __version__

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


def state(*values: str) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["state"],
        "properties": {"state": {"type": "string", "enum": list(values)}},
        "additionalProperties": False,
    }


def query(name: str, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": {"type": "string"}}


TRICKLE = {
    "type": "object",
    "required": ["trickle_ratio"],
    "properties": {"trickle_ratio": {"type": "number", "minimum": 0, "maximum": 1}},
    "additionalProperties": False,
}


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
            "/api/v1/overrides/backends/{pool}/{backend}": _override(
                "backend", state("down", "up", "drain"), ["pool", "backend"]
            ),
            "/api/v1/overrides/pools/{pool}": _override("pool", state("down", "up"), ["pool"]),
            "/api/v1/overrides/load_balancers/{lb}": _override(
                "load balancer trickle", TRICKLE, ["lb"]
            ),
        },
    }
