"""Configs the tests and the quick start serve probe only loopback addresses.

Probing a backend sends it traffic; on the build machines only 127.0.0.0/8 and ::1 may be
targets. A monitored backend elsewhere in these configs would break that rule.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from dnsd.config.loader import load_config

ROOT = Path(__file__).parent.parent
SERVED = [
    ROOT / "zones",
    *sorted(p for p in (ROOT / "tests" / "data").iterdir() if p.is_dir() and p.name != "bad"),
]


@pytest.mark.parametrize("directory", SERVED, ids=lambda p: str(p.relative_to(ROOT)))
def test_monitored_backends_are_on_loopback(directory: Path) -> None:
    config, _ = load_config(directory)
    for pool in config.pools.values():
        for backend in pool.backends:
            if backend.monitor or pool.monitor:
                assert backend.address is not None and backend.address.is_loopback, (
                    f"{directory.name}: pool {pool.name} backend {backend.name} would be probed at "
                    f"{backend.address or backend.hostname}"
                )
                assert isinstance(backend.address, ipaddress.IPv4Address | ipaddress.IPv6Address)
