"""The master key of DNS server cookies (dnsd.cookies): STATE_DIR/cookie.key, 32 random
bytes in hex, created at the first start with mode 0600. Every `--workers` process reads
the same file, so any of them accepts a cookie another made."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from dnsd.atomic_files import write_file

FILE = "cookie.key"


def load_cookie_key(state_dir: Path | None, create: bool) -> bytes:
    """The master key; without a state directory, a fresh one per process (cookies then
    do not survive a restart)."""
    if state_dir is None:
        return secrets.token_bytes(32)
    path = state_dir / FILE
    try:
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
        if len(key) >= 16:
            return key
    except (OSError, ValueError, UnicodeDecodeError):
        if not create:
            raise
    key = secrets.token_bytes(32)
    old = os.umask(0o077)
    try:
        write_file(path, key.hex() + "\n")
    finally:
        os.umask(old)
    return key
