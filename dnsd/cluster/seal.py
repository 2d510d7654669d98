"""Sealed health bus messages: whoever can write to Redis cannot speak for the cluster.

Every message and stored document is an envelope `{"body": TEXT, "mac": HEX}` where TEXT
is the canonical JSON of the body (sorted keys, no spaces) and MAC is HMAC-SHA256 under
the cluster key (`--redis-key-file`). A node started with `--redis-insecure` has no key: it
sends and accepts envelopes without a MAC (and says so in its log and status). Pure.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Literal

RejectReason = Literal[
    "malformed", "unauthenticated", "node", "future", "unknown_target", "replayed"
]
MIN_KEY_BYTES = 16
MAX_MESSAGE_BYTES = 64 * 1024


class Rejected(Exception):
    def __init__(self, reason: RejectReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: RejectReason = reason


def read_key(path: str) -> bytes:
    """The cluster key: the file's bytes without surrounding whitespace, at least 16."""
    with open(path, "rb") as handle:
        key = handle.read(4096).strip()
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"{path}: a cluster key needs at least {MIN_KEY_BYTES} bytes")
    return key


def canonical(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)


class Sealer:
    def __init__(self, key: bytes | None) -> None:
        self.key = key

    @property
    def authenticated(self) -> bool:
        return self.key is not None

    def _mac(self, text: str) -> str:
        assert self.key is not None
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def seal(self, body: dict[str, Any]) -> str:
        text = canonical(body)
        envelope = {"body": text}
        if self.key is not None:
            envelope["mac"] = self._mac(text)
        return json.dumps(envelope)

    def open(self, raw: str | bytes) -> dict[str, Any]:
        """The body of a sealed message; Rejected when it is not one this cluster sent."""
        if len(raw) > MAX_MESSAGE_BYTES:
            raise Rejected("malformed", f"larger than {MAX_MESSAGE_BYTES} bytes")
        try:
            envelope = json.loads(raw)
            text = envelope["body"]
            if not isinstance(text, str):
                raise TypeError("body is not text")
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise Rejected("malformed", f"not an envelope ({type(exc).__name__})") from None
        if self.key is not None:
            mac = envelope.get("mac")
            if not isinstance(mac, str) or not hmac.compare_digest(mac, self._mac(text)):
                raise Rejected("unauthenticated", "no valid MAC under the cluster key")
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            raise Rejected("malformed", "the body is not JSON") from None
        if not isinstance(body, dict):
            raise Rejected("malformed", "the body is not an object")
        return body
