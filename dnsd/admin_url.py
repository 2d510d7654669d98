"""`--server`: the admin API's URL (`http://HOST:PORT`, default http://127.0.0.1:8053).

`HOST:PORT` without a scheme is taken as `http://HOST:PORT`; anything else that is not an
http(s) URL is refused with a message that says what is wanted (a DNS address such as
`127.0.0.1:53` is not the admin API)."""

from __future__ import annotations

import argparse
import urllib.parse

EXAMPLE = "http://127.0.0.1:8053"
HINT = f"--server wants the admin API's URL, http://HOST:PORT (default {EXAMPLE})"


def admin_url(text: str) -> str:
    """The admin base URL for `text`; argparse.ArgumentTypeError when it cannot be one."""
    value = text.strip().rstrip("/")
    if "://" not in value:
        value = "http://" + value
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"{text!r}: {parts.scheme}:// is not http: {HINT}")
    try:
        port = parts.port
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a port number: {HINT}") from None
    if not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r}: no host: {HINT}")
    if port == 53:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a DNS address (port 53), not the admin API: {HINT}"
        )
    return value


def unreachable(server: str, problem: object) -> str:
    """The error for an admin URL nothing answered on, with what --server wants."""
    return f"cannot reach the admin API at {server}: {problem} ({HINT})"
