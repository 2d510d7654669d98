"""The keys each configuration entry accepts, with the JSON Schema of each value.

One table per kind of entry. The loader rejects keys not in its table (`Checker.keys`)
and the admin API's OpenAPI document describes config API bodies from the same tables,
so the published schema and the checker cannot drift apart. The checker still decides
what a value means (durations, ranges, cross-references); the schema is the shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dnsd.config.model import STEERING_POLICIES
from dnsd.config.zone_section import RECORD_TYPES, SOA_KEYS

STRING: dict[str, Any] = {"type": "string"}
INTEGER: dict[str, Any] = {"type": "integer"}
NUMBER: dict[str, Any] = {"type": "number"}
BOOLEAN: dict[str, Any] = {"type": "boolean"}
DURATION: dict[str, Any] = {
    "oneOf": [STRING, NUMBER],
    "description": '"500ms", "5s", "2m" or seconds',
}
STRINGS: dict[str, Any] = {"type": "array", "items": STRING}
POOL_TABLE: dict[str, Any] = {"type": "object", "additionalProperties": STRINGS}


def enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    schema: dict[str, Any]
    required: bool = False


Fields = tuple[Field, ...]


def names(fields: Fields) -> tuple[str, ...]:
    return tuple(f.name for f in fields)


def required(fields: Fields) -> tuple[str, ...]:
    return tuple(f.name for f in fields if f.required)


def schema(fields: Fields) -> dict[str, Any]:
    """The JSON Schema of an entry with these fields (unknown keys are refused)."""
    out: dict[str, Any] = {
        "type": "object",
        "properties": {f.name: f.schema for f in fields},
        "additionalProperties": False,
    }
    if required(fields):
        out["required"] = list(required(fields))
    return out


MONITOR: Fields = (
    Field("type", enum("http", "https", "tcp", "dns"), required=True),
    Field("interval", DURATION),
    Field("timeout", DURATION),
    Field("retries", INTEGER),
    Field("healthy_threshold", INTEGER),
    Field("unhealthy_threshold", INTEGER),
    Field("port", INTEGER),
    Field("method", STRING),
    Field("path", STRING),
    Field("host", STRING),
    Field("headers", {"type": "object", "additionalProperties": STRING}),
    Field("expected_codes", {"oneOf": [STRING, INTEGER]}),
    Field("expected_body", STRING),
    Field("follow_redirects", BOOLEAN),
    Field("allow_insecure", BOOLEAN),
    Field("sources", STRINGS),
    Field("quorum", INTEGER),
    Field(
        "quorum_hold",
        {"oneOf": [STRING, NUMBER], "description": '"30s", "2m", seconds, or "forever"'},
    ),
    Field("initial", enum("healthy", "unhealthy")),
    Field("rtt_ewma_alpha", NUMBER),
    Field("ca_file", STRING),
    Field("expected_rcodes", {"type": "array", "items": {"oneOf": [STRING, INTEGER]}}),
    Field("query_name", STRING),
    Field("query_type", STRING),
)

BACKEND: Fields = (
    Field("name", STRING, required=True),
    Field(
        "address",
        {**STRING, "description": "an IP address, or a host name (answered as CNAME)"},
        required=True,
    ),
    Field("port", INTEGER),
    Field("zone", STRING),
    Field("role", enum("primary", "failover")),
    Field("weight", INTEGER),
    Field("enabled", BOOLEAN),
    Field("monitor", STRING),
)

POOL: Fields = (
    Field("monitor", STRING),
    Field("minimum_origins", INTEGER),
    Field("region", STRING),
    Field("latitude", NUMBER),
    Field("longitude", NUMBER),
    Field("weight", NUMBER),
    Field("enabled", BOOLEAN),
    Field("capacity", NUMBER),
    Field("enabled", BOOLEAN),
    Field("domain", STRING),
    Field(
        "zonal_affinity",
        {
            "type": "object",
            "properties": {
                "mode": enum("DISABLED", "STAY_WITHIN_ZONE", "SPILL_CROSS_ZONE"),
                "spillover_ratio": NUMBER,
            },
        },
    ),
    Field(
        "failover_policy",
        {
            "type": "object",
            "properties": {"failover_ratio": NUMBER, "drop_traffic_if_unhealthy": BOOLEAN},
        },
    ),
    Field("backends", {"type": "array", "items": schema(BACKEND)}, required=True),
)

LOAD_BALANCER: Fields = (
    Field("ttl", INTEGER),
    Field("steering", enum(*STEERING_POLICIES)),
    Field("default_pools", STRINGS, required=True),
    Field("fallback_pool", STRING),
    Field("region_pools", POOL_TABLE),
    Field("country_pools", POOL_TABLE),
    Field("subdivision_pools", POOL_TABLE),
    Field("pop_pools", POOL_TABLE),
    Field("trickle_ratio", NUMBER),
    Field("max_answers", INTEGER),
    Field("selection", enum("random", "hash")),
    Field("min_samples", INTEGER),
    Field("rtt_max_age", DURATION),
    Field("client_region", enum("client", "pop")),
    Field("max_outage", DURATION),
    Field("when_all_down", enum("fallback", "closed", "servfail", "all", "last_good")),
    Field("ramp", {"type": "object", "properties": {"duration": DURATION, "steps": INTEGER}}),
    Field("overflow", enum("waterfall")),
    Field("answer_pools", INTEGER),
    Field("distinct", enum("region", "zone", "domain")),
)

_VALUES: dict[str, Any] = {"oneOf": [STRING, STRINGS]}
RECORD: Fields = (
    *(Field(rtype, _VALUES) for rtype in RECORD_TYPES),
    Field("ttl", INTEGER),
    Field("lb", {**STRING, "description": "a load balancer answers this name"}),
)

# A zone's own settings (config API `zones/Z`); the zone checker (zone_section) decides.
ZONE: Fields = (
    Field("ttl", INTEGER),
    Field(
        "soa",
        {
            "type": "object",
            "properties": {k: STRING if k in ("mname", "rname") else INTEGER for k in SOA_KEYS},
        },
    ),
    Field("file", {**STRING, "description": "an RFC 1035 master file in the config directory"}),
    Field("transfer", {"type": "object", "properties": {"allow": STRINGS, "keys": STRINGS}}),
    Field("notify", STRINGS),
    Field(
        "dnssec", {"type": "object", "properties": {"algorithm": INTEGER, "split_keys": BOOLEAN}}
    ),
    Field(
        "catalog",
        {
            "type": "object",
            "description": "an RFC 9432 catalog zone of these",
            "properties": {"members": {"oneOf": [STRING, STRINGS]}},
        },
    ),
    Field("catalog_group", {**STRING, "description": "the group property in catalogs"}),
    Field(
        "update",
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"key": STRING, "names": STRINGS, "types": STRINGS},
            },
        },
    ),
)
