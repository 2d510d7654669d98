"""A load makes no reference cycles: it ends with gc.freeze() (dnsd.process_tools.loading),
so cyclic garbage made on the way would never be collected — kept on every reload."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from dnsd.config.loader import ParseCache
from dnsd.loading import load_snapshot

ZONES = Path(__file__).resolve().parents[2] / "zones"


def test_loading_the_bundled_zones_leaves_no_cyclic_garbage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gc, "freeze", lambda: None)  # it would hide the garbage from collect
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what collect finds unreachable stays in gc.garbage
    try:
        snapshot = load_snapshot(ZONES, 1, cache=ParseCache())
        gc.collect()
        found = [type(o).__qualname__ for o in gc.garbage]
        functions = [o.__qualname__ for o in gc.garbage if callable(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert snapshot.zones
    assert not found, f"cyclic garbage after a load: {functions or found[:10]}"
