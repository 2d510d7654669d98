"""`when_all_down: last_good` (docs/steering.md, when all pools are down): per load balancer,
client region and address family, the answer given while something was healthy, kept in the
health view (what a decision reads) and in STATE_DIR/last_good.json (so it survives a restart).

After each health view whose states changed (and after a reload), the load balancers with
`last_good` that reach what changed are steered once per client region and family — as the status document steers
them, a client placed in each region — and every answer that had something healthy behind it
replaces the one remembered. The entry of a load balancer with nothing healthy is never
touched, so its decisions stay pure functions of the view (no generation of its own is
needed). The file is written by a thread of its own, atomically; it is read once at start,
bounded in size, and an unreadable one is logged and ignored (dnsd then answers `fallback`
until something is healthy again).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from dnsd.atomic_files import write_file
from dnsd.geo.locate import Location
from dnsd.geo.regions import REGIONS
from dnsd.health.store import HealthStore
from dnsd.health.view import HealthView, LastGoodAnswer, change_between
from dnsd.snapshot import SnapshotHolder
from dnsd.steering import ClientInfo, SteeringInputs, steer
from dnsd.steering.records import AAAA, A
from dnsd.steering.select import last_good_key

log = logging.getLogger("dnsd.last_good")
FILE: Final = "last_good.json"
MAX_FILE_BYTES: Final = 4 << 20  # read at start: a larger file is not ours, or not sane
MAX_ENTRIES: Final = 100_000
MAX_VALUES: Final = 64  # addresses per answer (max_answers is at most 64)
MAX_NAME: Final = 255
PLACEHOLDER = ipaddress.ip_address("192.0.2.1")  # the location is set directly
TYPES: Final = {"A": A, "AAAA": AAAA}
Key = tuple[str, str, int]


def remembered(
    snap: Any, view: HealthView, now: float, only: Collection[str] | None = None
) -> dict[Key, LastGoodAnswer]:
    """The view's entries, with this view's answers for every load balancer with
    `last_good` (of `only`, when given) that has something healthy; entries of load
    balancers no longer using `last_good` are dropped."""
    lbs = {n: lb for n, lb in snap.config.load_balancers.items() if lb.when_all_down == "last_good"}
    out = {key: answer for key, answer in view.last_good.items() if key[0] in lbs}
    for lb in lbs.values():
        if only is not None and lb.name not in only:
            continue
        for region in (*REGIONS, None):
            client = ClientInfo(
                PLACEHOLDER,
                location=Location(region=region, source="pop_region"),
                pop=snap.node.name,
            )
            for qtype in (A, AAAA):
                inputs = SteeringInputs(snap, view, client, random.Random(0), now)
                answer = steer(inputs, lb, qtype).answer
                assert answer is not None  # a walk's explanation carries its decision
                outcome = answer.outcome
                if outcome.fail_open or unprobed(snap, view, outcome.pool):
                    continue  # nothing healthy: keep what was given while something was
                out[last_good_key(lb, region, qtype)] = (outcome.addresses, outcome.cname)
    return out


def unprobed(snap: Any, view: HealthView, answered: str | None) -> bool:
    """The answering pool has a backend not probed yet (a start: its verdict is only the
    monitor's `initial`): not an answer to remember over the one kept from before."""
    pool = snap.config.pools.get(answered or "")
    return pool is not None and any(
        view.backend(pool, backend).probed == "unknown" for backend in pool.backends
    )


def to_json(entries: Mapping[Key, LastGoodAnswer]) -> str:
    names = {code: name for name, code in TYPES.items()}
    rows = [
        {
            "lb": lb,
            "region": region,
            "type": names[qtype],
            "addresses": list(addresses),
            "cname": cname,
        }
        for (lb, region, qtype), (addresses, cname) in sorted(entries.items())
    ]
    return json.dumps({"version": 1, "answers": rows}, separators=(",", ":")) + "\n"


def from_json(text: str) -> dict[Key, LastGoodAnswer]:
    """The entries of a file written by `to_json`; ValueError for anything else."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError("not a last_good file of version 1")
    rows = data.get("answers")
    if not isinstance(rows, list) or len(rows) > MAX_ENTRIES:
        raise ValueError(f"answers: a list of at most {MAX_ENTRIES} entries expected")
    out: dict[Key, LastGoodAnswer] = {}
    for row in rows:
        if not isinstance(row, dict):
            raise ValueError("an answer is not an object")
        lb, region, rtype = row.get("lb"), row.get("region"), row.get("type")
        addresses, cname = row.get("addresses"), row.get("cname")
        if not isinstance(lb, str) or not 0 < len(lb) <= MAX_NAME:
            raise ValueError(f"bad load balancer name {lb!r}")
        if not isinstance(region, str) or (region and region not in REGIONS):
            raise ValueError(f"bad region {region!r}")
        if rtype not in TYPES:
            raise ValueError(f"bad type {rtype!r}")
        if not isinstance(addresses, list) or len(addresses) > MAX_VALUES:
            raise ValueError(f"addresses: a list of at most {MAX_VALUES} expected")
        family = ipaddress.IPv6Address if rtype == "AAAA" else ipaddress.IPv4Address
        for address in addresses:
            if not isinstance(address, str) or not isinstance(
                ipaddress.ip_address(address), family
            ):
                raise ValueError(f"bad {rtype} address {address!r}")
        if cname is not None and (not isinstance(cname, str) or not 0 < len(cname) <= MAX_NAME):
            raise ValueError(f"bad cname {cname!r}")
        out[(lb, region, TYPES[rtype])] = (tuple(addresses), cname)
    return out


class LastGood:
    """Records the answers after each view (the main process's view step) and keeps the
    file; `load` puts the file's entries in the store's view before anything answers."""

    def __init__(
        self,
        holder: SnapshotHolder,
        store: HealthStore,
        state_dir: Path | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.holder, self.store, self.clock = holder, store, clock
        self.path = state_dir / FILE if state_dir is not None else None
        self._seen: tuple[int, int] | None = None  # (config id, states generation) recorded
        self._last: tuple[Any, HealthView] | None = None  # the config and view recorded from
        self._pending: str | None = None
        self._lock = threading.Lock()
        self._writing = threading.Lock()
        self._wake = threading.Event()
        self._writer: threading.Thread | None = None
        self.writes = 0  # files written (tests wait on it)

    def load(self) -> int:
        """The file's entries into the store's view; how many (0: none, or unreadable)."""
        if self.path is None or not self.path.exists():
            return 0
        try:
            if self.path.stat().st_size > MAX_FILE_BYTES:
                raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
            entries = from_json(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            log.warning(
                "%s: ignored (%s): last_good answers fallback until a pool is up", self.path, exc
            )
            return 0
        view = self.store.view
        self.store.view = replace(view, last_good=MappingProxyType({**view.last_good, **entries}))
        return len(entries)

    def on_view(self, view: HealthView) -> None:
        """After a view is published (event loop): record when the states or the config
        changed, and hand a changed table to the writer."""
        snap = self.holder.current
        seen = (id(snap.config), view.states_generation)
        if seen == self._seen:
            return  # RTT only: nothing the table depends on moved (dynamic: next change)
        self._seen = seen
        lbs = snap.config.load_balancers.values()
        if not view.last_good and not any(lb.when_all_down == "last_good" for lb in lbs):
            return  # the common case: nobody uses it
        entries = remembered(snap, view, self.clock(), self._affected(snap, view))
        if entries == dict(view.last_good):
            return
        current = self.store.view  # the view just published, or a newer one: same states
        self.store.view = replace(current, last_good=MappingProxyType(entries))
        self._write_later(to_json(entries))

    def _affected(self, snap: Any, view: HealthView) -> Collection[str] | None:
        """The load balancers whose answer may have moved since the last view recorded
        from (None: all — a start or a reload), so a pool's health steers only those that
        use it, not every `last_good` load balancer."""
        last, self._last = self._last, (snap.config, view)
        if last is None or last[0] is not snap.config:
            return None
        change = change_between(last[1], view)
        return set(snap.lb_graph.reached_lbs(change.pools, (), change.lbs))

    def _write_later(self, text: str) -> None:
        if self.path is None:
            return
        with self._lock:
            self._pending = text
        self._wake.set()
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_loop, name="last-good", daemon=True)
            self._writer.start()

    def _write_loop(self) -> None:
        """Off the serving path: the latest table, written atomically (a burst of changes
        is one write of the last)."""
        while True:
            self._wake.wait()
            self._wake.clear()
            self.flush()

    def flush(self) -> None:
        """Write the latest table not yet written (the writer thread; and at stop)."""
        with self._writing:  # one write at a time: an older table never lands last
            with self._lock:
                text, self._pending = self._pending, None
            if text is None or self.path is None:
                return
            try:
                write_file(self.path, text)
                self.writes += 1
            except OSError as exc:  # a full disk: the table stays in memory
                log.warning("%s: not written: %s", self.path, exc)
