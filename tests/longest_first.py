"""The order `make test` hands test files to its pytest-xdist processes: the longest first.

With `--dist loadfile` a file runs whole in one process, and xdist's own order (the files
with the most tests first) started the few-test, minutes-long files (the compose topology,
the lab, the soak) last: one process ran them for minutes while the other had finished.
Started first, they run beside everything else; the many short files fill in around them
and end the run evenly. `make test` passes `--no-loadscope-reorder` so this order is kept.

The seconds are one `make test` run's on 2 cores (2026-12-06, a loaded machine: the
CPU-bound ones take about half that on an idle one): only their order matters, and it is longest first but
for the one exception below. A file not listed runs after these, in collection order; list a new file here
when it takes more than ~15 s."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

LONGEST_FIRST = (
    "tests/e2e/test_docker_compose.py",  # 225 s: images built, a drill plan in the topology
    # Beside the compose file's image build (minutes of CPU), the CPU-bound property test
    # rather than the lab, whose drills time failovers against bounds: the lab starts
    # after it, in the same process, while the compose file mostly waits on its drill.
    "tests/property/test_draws_explain.py",  # 105 s: 2,000 generated plans
    "tests/e2e/test_lab.py",  # 180 s: the network-namespace lab, twice, and its drill plan
    "tests/e2e/test_drills.py",  # 66 s: `dnsd drill all` through unbound, once
    "tests/e2e/test_drill_plans.py",  # 90 s: drill plans in real time
    "tests/e2e/test_cluster_redis.py",  # 68 s: three nodes and a redis-server
    "tests/e2e/test_soak.py",  # 62 s: a minute of hostile traffic
    "tests/e2e/test_dnssec.py",  # 54 s: key rolls through a validating unbound
    "tests/integration/test_config_atomic.py",  # 50 s: SIGKILL during writes
    "tests/property/test_lb_shapes.py",  # 38 s: random shapes under random health
    "tests/e2e/test_install_venv.py",  # 37 s: a venv and pip install
    "tests/integration/test_admin_door.py",  # 37 s
    "tests/e2e/test_config_write_cost.py",  # 31 s: a 40,000-record zone
    "tests/e2e/test_drill_ramp.py",  # 30 s: a ramp drill in real time
    "tests/unit/test_provision_reuse.py",  # 28 s
    "tests/integration/test_hostile.py",  # 27 s
    "tests/e2e/test_dynamic_update.py",  # 26 s: nsupdate, knsupdate, lego
    "tests/property/test_zone_tables.py",  # 26 s
    "tests/e2e/test_stale_sources.py",  # 26 s
    "tests/e2e/test_differential.py",  # 25 s: Knot beside dnsd
    "tests/e2e/test_workers.py",  # 25 s
    "tests/e2e/test_proxy_protocol.py",  # 24 s
    "tests/e2e/test_dynamic_trickle_failover.py",  # 24 s
    "tests/integration/test_patterns.py",  # 23 s
    "tests/e2e/test_dnssec_details.py",  # 22 s: dnsviz
    "tests/e2e/test_waterfall.py",  # 21 s
    "tests/unit/test_steering.py",  # 20 s
    "tests/e2e/test_config_reads.py",  # 20 s: a 60,000-record directory
    "tests/e2e/test_multinode.py",  # 20 s
    "tests/e2e/test_dnstap.py",  # 20 s
    "tests/integration/test_serving_loop_supervision.py",  # 19 s
    "tests/unit/test_steering_rules.py",  # 18 s
    "tests/integration/test_health.py",  # 17 s
)


def order(items: list[pytest.Item]) -> None:
    """Sorts `items` in place: the listed files first, longest first; the rest after, as
    collected (a stable sort: each file's tests keep their order)."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
