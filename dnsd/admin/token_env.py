"""The admin token a command takes from its environment: `dnsd serve` guards the API with
it, `dnsd drill plan` sends it."""

from __future__ import annotations

import os
from pathlib import Path


def admin_token_from_environment() -> str | None:
    """DNSD_ADMIN_TOKEN, or the first line of the file DNSD_ADMIN_TOKEN_FILE names (a Docker
    or systemd secret: the token stays out of the environment and `docker inspect`)."""
    path = os.environ.get("DNSD_ADMIN_TOKEN_FILE")
    if path:
        try:
            line = Path(path).read_text(encoding="utf-8").splitlines()[0].strip()
        except (OSError, IndexError, UnicodeDecodeError) as exc:
            raise SystemExit(f"DNSD_ADMIN_TOKEN_FILE={path}: cannot read a token: {exc}") from None
        return line or None
    return os.environ.get("DNSD_ADMIN_TOKEN") or None
