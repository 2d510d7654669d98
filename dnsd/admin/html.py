"""The status page's one template helper: every text that reaches HTML or SVG passes
through `esc` (names come from config files and the admin API, so they may hold `<`, `&`
or quotes), and UTC times are written one way, with their zone."""

from __future__ import annotations

import html
from datetime import UTC, datetime


def esc(value: object) -> str:
    """Text or attribute value, quotes included."""
    return html.escape(str(value), quote=True)


def attrs(**values: object) -> str:
    """` name="value"` pairs; None is left out, `_` in a name becomes `-` (data_lb)."""
    return "".join(
        f' {name.rstrip("_").replace("_", "-")}="{esc(value)}"'
        for name, value in values.items()
        if value is not None
    )


def utc(at: float | None, seconds: bool = True) -> str:
    """`2026-12-01 18:00:05Z`: UTC, marked as such."""
    if at is None:
        return "-"
    fmt = "%Y-%m-%d %H:%M:%SZ" if seconds else "%Y-%m-%d %H:%MZ"
    return datetime.fromtimestamp(at, UTC).strftime(fmt)


def parse_utc(text: str | None) -> float | None:
    """An event's ISO 8601 `time` (`...Z` or with an offset) as epoch seconds."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def shorten(text: str, width: int) -> str:
    """At most `width` characters, an ellipsis marking a cut (inside SVG, which cannot wrap);
    the full text goes beside it, in a title or the text table."""
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"
