"""A lost quorum does not freeze failover (docs/health.md "Lost quorum"): three real nodes on a
real redis-server; two stopped, a backend fails: after `quorum_hold` the survivor's own fresh
probe decides, the status and the metrics say so."""

from __future__ import annotations

from tests.admin_client import http
from tests.e2e.test_multinode import INTERVAL, THRESHOLD, all_nodes, answers, running_cluster
from tests.e2e.test_stale_sources import BOTH, MAX_AGE_S, wait_status

QUORUM_HOLD_S = 2.0


def test_after_quorum_hold_the_fresh_sources_decide(tmp_path) -> None:
    with running_cluster(tmp_path, MAX_AGE_S, quorum_hold=f"{QUORUM_HOLD_S:g}s") as cluster:
        nodes = cluster["nodes"]
        all_nodes(cluster, lambda a: a == BOTH, 10)
        nodes.pop("b").stop()
        nodes.pop("c").stop()  # only node a (WNAM) probes now
        a = nodes["a"]
        cluster["loop"].call(cluster["backends"]["b1"].set_mode("503"))
        lost = wait_status(a, "b1", lambda d: d["sources_fresh"] == 1, 20)
        assert lost["quorum"] == "degraded" and lost["quorum_since"]
        bound = QUORUM_HOLD_S + INTERVAL * THRESHOLD + 3 * MAX_AGE_S + 5
        down = wait_status(a, "b1", lambda d: d["probed"] == "unhealthy", bound)
        assert down["healthy"] is False and down["quorum"] == "degraded"
        assert down["quorum_verdict"] == "fresh"
        assert answers(a.port) == {"127.0.0.72"}
        _, metrics = http(a.admin_port, "GET", "/metrics")
        text = metrics if isinstance(metrics, str) else str(metrics)
        assert 'dnsd_backend_up{backend="b1",pool="p"} 0.0' in text
        assert 'dnsd_backend_quorum_degraded{backend="b1",pool="p"} 1.0' in text
        assert 'dnsd_health_sources_fresh{monitor="web"} 1.0' in text
        _, events = http(a.admin_port, "GET", "/api/v1/events?kind=quorum")
        assert any(e.get("backend") == "b1" for e in events["events"]), events
