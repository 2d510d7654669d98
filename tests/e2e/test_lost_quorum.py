"""A lost quorum does not freeze failover (docs/health.md "Lost quorum"): three real nodes on a
real redis-server; two stopped, a backend fails: after `quorum_hold` the survivor's own fresh
probe decides, the status, the status page and the metrics say so."""

from __future__ import annotations

import re
import urllib.request

from tests.admin_client import http
from tests.e2e.test_multinode import INTERVAL, THRESHOLD, all_nodes, answers, running_cluster
from tests.e2e.test_stale_sources import BOTH, MAX_AGE_S, wait_status

QUORUM_HOLD_S = 2.0
MARK = re.compile(
    r"quorum lost since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(for \d+ s\): 1 of 3 sources fresh, "
    r"verdict (held|decided by the fresh sources)"
)


def page_marks(admin_port: int) -> tuple[str, str]:
    """The status page as sent: the text of backend p/b1's row, and the banner's
    lost-quorum fact ("" when there is none)."""
    url = f"http://127.0.0.1:{admin_port}/"
    with urllib.request.urlopen(url, timeout=5) as response:
        html = response.read().decode()
    row = re.search(r'<tr[^>]*data-backend="p/b1"[^>]*>(.*?)</tr>', html, re.S)
    assert row, html
    fact = re.search(r'<li[^>]*data-fact="quorum-lost"[^>]*>(.*?)</li>', html, re.S)
    strip = lambda text: re.sub(r"<[^>]+>", "", text)  # noqa: E731
    return strip(row[0]), strip(fact[1]) if fact else ""


def test_after_quorum_hold_the_fresh_sources_decide(tmp_path) -> None:
    with running_cluster(tmp_path, MAX_AGE_S, quorum_hold=f"{QUORUM_HOLD_S:g}s") as cluster:
        nodes = cluster["nodes"]
        all_nodes(cluster, lambda a: a == BOTH, 10)
        # every node has shared its view of b1 before two stop (a source never heard from
        # is not stale: it would count as fresh, and the quorum never be lost)
        heard = lambda d: all(s["state"] == "healthy" for s in d["sources"].values())  # noqa: E731
        wait_status(nodes["a"], "b1", heard, 20)
        nodes.pop("b").stop()
        nodes.pop("c").stop()  # only node a (WNAM) probes now
        a = nodes["a"]
        cluster["loop"].call(cluster["backends"]["b1"].set_mode("503"))
        # the stopped nodes' reports age out after MAX_AGE_S: a loaded machine takes longer
        lost = wait_status(a, "b1", lambda d: d["sources_fresh"] == 1, 3 * MAX_AGE_S + 20)
        assert lost["quorum"] == "degraded" and lost["quorum_since"]
        row, fact = page_marks(a.admin_port)  # the page marks the backend, and says it on top
        assert MARK.search(row), row
        assert fact.endswith("of the pools shown without a probe quorum"), fact
        bound = QUORUM_HOLD_S + INTERVAL * THRESHOLD + 3 * MAX_AGE_S + 5
        down = wait_status(a, "b1", lambda d: d["probed"] == "unhealthy", bound)
        assert down["healthy"] is False and down["quorum"] == "degraded"
        assert down["quorum_verdict"] == "fresh"
        row, _ = page_marks(a.admin_port)
        assert MARK.search(row)[1] == "decided by the fresh sources", row
        assert answers(a.port) == {"127.0.0.72"}
        _, metrics = http(a.admin_port, "GET", "/metrics")
        text = metrics if isinstance(metrics, str) else str(metrics)
        assert 'dnsd_backend_up{backend="b1",pool="p"} 0.0' in text
        assert 'dnsd_backend_quorum_degraded{backend="b1",pool="p"} 1.0' in text
        assert 'dnsd_health_sources_fresh{monitor="web"} 1.0' in text
        _, events = http(a.admin_port, "GET", "/api/v1/events?kind=quorum")
        assert any(e.get("backend") == "b1" for e in events["events"]), events
