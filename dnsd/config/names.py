"""Domain-name helpers for configuration: normalise and check names."""

from __future__ import annotations

import re

_LABEL = re.compile(r"^(?:\*|[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)$")


def absolute(name: str, origin: str) -> str:
    """A record owner or target as written in a zone file → absolute lower-case name.

    `@` is the origin, a name ending in a dot is absolute, anything else is relative to
    the origin (zone-file convention).
    """
    name = name.strip().lower()
    if name in ("@", ""):
        return origin
    if name.endswith("."):
        return name
    return f"{name}.{origin}" if origin != "." else f"{name}."


def name_problem(name: str) -> str | None:
    """Why an absolute name is not a valid DNS name, or None if it is."""
    if name == ".":
        return None
    labels = name.rstrip(".").split(".")
    if len(name) > 254:
        return "name longer than 253 characters"
    for i, label in enumerate(labels):
        if not label:
            return "empty label"
        if len(label) > 63:
            return f"label {label[:20]!r}… longer than 63 characters"
        if not _LABEL.match(label):
            return f"label {label!r} has characters other than letters, digits, '-' and '_'"
        if label == "*" and i != 0:
            return "'*' may only be the leftmost label"
    return None


def is_subdomain(name: str, zone: str) -> bool:
    return zone == "." or name == zone or name.endswith("." + zone)
