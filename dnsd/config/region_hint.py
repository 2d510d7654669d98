"""The hint an unknown region name gets in a config error."""

from __future__ import annotations

from dnsd.geo.regions import REGIONS


def regions_hint(value: str) -> str:
    import difflib

    close = difflib.get_close_matches(value.upper(), REGIONS, n=1, cutoff=0.5)
    if close:
        return f'did you mean "{close[0]}"?'
    return "one of " + " ".join(REGIONS)
