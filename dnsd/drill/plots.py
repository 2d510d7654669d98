"""Drill pictures are optional: matplotlib (and numpy under it) come with the `plots` extra,
`pip install 'dnsd[plots]'`. Without it drills run and print their tables; asking for a
picture says how to get one instead of failing."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

HINT = "no pictures: they need matplotlib, the plots extra: pip install 'dnsd[plots]'"


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def pyplot() -> Any:
    """matplotlib.pyplot drawing into files (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def can_plot(what: str) -> bool:
    """True when pictures can be drawn; else says so on stderr (what was asked: `--plot`)."""
    if available():
        return True
    print(f"{what}: {HINT}", file=sys.stderr)
    return False
