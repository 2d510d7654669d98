"""A blocking HTTP client for admin API tests (urllib: no extra dependency)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def http(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():  # set last: they replace the defaults
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text
