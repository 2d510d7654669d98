"""The active-pool metrics of 10,000 load balancers (310,000 samples): how long the first
render, a scrape between two changes (the kept text) and a render after new health states
take. The unit test (tests/unit/test_active_pool_metrics.py) counts the work; this times it.

    python3 bench/active_pool_metrics.py

Measured on the 2-core CI machine kind: first ~1.3 s, kept ~11 µs, after a change ~0.3 s.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))

from dnsd.admin.active_pool_metrics import ActivePools  # noqa: E402
from dnsd.admin.metrics import Metrics  # noqa: E402
from dnsd.admin.status import answering_pool, health_failed_over, shared_region_states  # noqa: E402
from dnsd.config.loader import load_config  # noqa: E402
from dnsd.health.store import HealthStore  # noqa: E402
from dnsd.snapshot import SnapshotHolder, compile_snapshot  # noqa: E402
from tests.unit.test_active_pool_metrics import big_config  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        big_config(Path(directory))
        config, _ = load_config(Path(directory))
    snap = compile_snapshot(config, 1)
    holder, store = SnapshotHolder(snap), HealthStore()
    store.set_snapshot(snap)
    store.publish()
    server = SimpleNamespace(holder=holder, store=store)
    active = ActivePools(
        holder, store, lambda lb, now: shared_region_states(server, lb, now), answering_pool,
        health_failed=lambda lb, now: health_failed_over(server, lb, now),  # type: ignore[arg-type]
    )  # fmt: skip
    metrics = Metrics()
    metrics.add_text(active.text)
    started = time.perf_counter()
    metrics.render()
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    active.text()
    kept_s = time.perf_counter() - started
    store.set_pool_override("p1", "down")
    started = time.perf_counter()
    active.text()
    changed_s = time.perf_counter() - started
    print(f"first render {first_s:.2f} s, kept {kept_s * 1e6:.0f} µs, "
          f"after new health states {changed_s:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
