"""What this node keeps and tells of the shared config history: its copy of the records it
applied, kept in `STATE_DIR/config-sync.json` (a copy the cluster is re-seeded from when
Redis lost the history), the sync's gauges, and the audit record of a change set applied
or refused here. `config_channel.py` follows the history; this module holds no state."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from dnsd.atomic_files import write_file
from dnsd.cluster.config_log import GENESIS, Record, chain, record_of

log = logging.getLogger("dnsd.cluster.config")


def load_history(state_file: Path | None) -> list[Record]:
    """The records this node applied, in chain order; empty (and said) when the file is
    missing, unreadable or does not chain from the start."""
    if state_file is None or not state_file.exists():
        return []
    try:
        data = json.loads(state_file.read_text())
        history = [record_of(body) for body in data.get("history", [])]
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        log.error(
            "%s unreadable (%s): following the shared history from its start", state_file, exc
        )
        return []
    linked, orphans = chain(history)
    if orphans or (linked and linked[0].prev != GENESIS):
        log.error("%s: a broken history: following the shared one from its start", state_file)
        return []
    return linked


def save_history(state_file: Path | None, history: Sequence[Record]) -> None:
    if state_file is None:
        return
    head = history[-1] if history else None
    body = {
        "digest": head.digest if head else GENESIS,
        "seq": head.seq if head else 0,
        "history": [r.body() for r in history],
    }
    write_file(state_file, json.dumps(body, sort_keys=True))


def audit_record(
    records: Sequence[Record],
    origins: list[str],
    status: int,
    before: Any,
    after: Any,
    error: str | None,
) -> dict[str, Any]:
    """The config audit log's record of shared records applied (or refused) here."""
    routes = [route for r in records for route, _ in r.entries]
    return {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "token": None,
        "source": "redis",
        "origin_node": ", ".join(origins)[:200],
        "method": "SYNC",
        "route": routes[0][:300] if routes else "",
        "routes": routes[:200],
        "seq": [records[0].seq, records[-1].seq],
        "before": before,
        "after": after,
        "status": status,
        **({"error": error[:300]} if error else {}),
    }


def sync_gauges(state: str, seq_applied: int) -> Iterator[GaugeMetricFamily]:
    """The config sync's gauges: diverged, stalled, and the records applied here."""
    diverged = GaugeMetricFamily(
        "dnsd_config_sync_diverged",
        "1 while this node's config cannot follow the cluster's shared history",
    )
    diverged.add_metric([], 1.0 if state == "diverged" else 0.0)
    yield diverged
    stalled = GaugeMetricFamily(
        "dnsd_config_sync_stalled",
        "1 while Redis is reachable but the shared config history cannot be read or written",
    )
    stalled.add_metric([], 1.0 if state == "stalled" else 0.0)
    yield stalled
    seq = GaugeMetricFamily(
        "dnsd_config_sync_seq", "Records of the shared config history applied here"
    )
    seq.add_metric([], float(seq_applied))
    yield seq
