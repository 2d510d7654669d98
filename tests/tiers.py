"""How much a property or fuzz test explores: all of it in `make test`, a tenth in
`make test-fast` (DNSD_TEST_TIER=fast), so the edit loop stays short and the full run
still explores everything."""

from __future__ import annotations

import os

FAST = os.environ.get("DNSD_TEST_TIER") == "fast"


def examples(full: int) -> int:
    """`full` cases in the whole suite, a tenth (at least 10) in the fast tier."""
    return max(10, full // 10) if FAST else full
