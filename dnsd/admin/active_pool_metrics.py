"""What answers now, per load balancer and client region: the active pool, failed over,
fail open, failed over by health, all down — exposition text rendered by hand."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dnsd.health.store import HealthStore
from dnsd.snapshot import SnapshotHolder

RegionStates = Callable[[Any, float], tuple[Mapping[str, str], Sequence[str]]]  # (lb, now)
AnsweringPool = Callable[[str], tuple[str, bool]]
ACTIVE_REFRESH_S = 5.0  # RTT-only publications are looked at this often at most
ACTIVE_FAMILIES = (
    (
        "dnsd_lb_active_pool",
        "1 for the pool answering clients of this region now (overrides "
        "and a trickle of 1.0 included; the innermost pool for nested load balancers)",
    ),
    (
        "dnsd_lb_failed_over",
        "1 when the region is not answered by its first-choice pool (at any level)",
    ),
    (
        "dnsd_lb_fail_open",
        "1 when some client region is answered by a fallback because nothing was healthy",
    ),
)
ALL_DOWN = (
    "dnsd_lb_all_down",
    "1 while some client region of the load balancer is answered by "
    "this when_all_down rule (nothing healthy, the fallback pool included); 0 for the "
    "configured rule otherwise",
)
AllDownRule = Callable[[Any, Any, str], "str | None"]  # (config, lb, active chain) → rule
HEALTH_FAILOVER = (
    "dnsd_lb_failed_over_by_health",
    "Client regions off their first-choice pool because of "
    "health, not planned work: answered otherwise than the overrides, drains and manual "
    "failovers in force alone would answer them (what to page on)",
)
HealthFailed = Callable[[Any, float], Sequence[str]]  # (lb, now) → regions failed by health


class ActivePools:
    """For every load balancer and client region, the pool answering now and whether it is
    the first choice, read from the one computation the status document shows
    (`shared_region_states`, which steers once per class of alike load balancers).

    Rendered as exposition text by hand, not through prometheus-client: 10,000 load
    balancers are 310,000 samples, which the library formats at ~50 µs each (15 s
    measured on the CI machine). Here each class's per-region text is made once, each
    load balancer costs one join, and the text is kept until the snapshot or the health
    states change (RTT-only publications: at most every ACTIVE_REFRESH_S)."""

    def __init__(
        self,
        holder: SnapshotHolder,
        store: HealthStore,
        region_states: RegionStates,
        answering_pool: AnsweringPool,
        clock: Callable[[], float] = time.time,
        health_failed: HealthFailed | None = None,
        all_down_rule: AllDownRule | None = None,
    ) -> None:
        self.holder, self.store = holder, store
        self.all_down_rule = all_down_rule  # None: dnsd_lb_all_down not exported
        self.region_states, self.answering_pool = region_states, answering_pool
        self.health_failed = health_failed  # None: dnsd_lb_failed_over_by_health not exported
        self.clock = clock
        self._key: tuple[int, int, int, int] | None = None
        self._at = 0.0
        self._text = b""

    def text(self) -> bytes:
        snap, view, now = self.holder.current, self.store.view, self.clock()
        # Numbers, not the snapshot: an old one is freed off the loop (dnsd.reaper) only
        # when nothing else holds it.
        key = (id(snap), snap.generation, view.states_generation, view.generation)
        if self._key is not None and (
            key == self._key or (key[:3] == self._key[:3] and now - self._at < ACTIVE_REFRESH_S)
        ):
            return self._text
        self._text = self._render(snap, now)
        self._key, self._at = key, now
        return self._text

    def _render(self, snap: Any, now: float) -> bytes:
        active_lines: list[str] = []
        failed_lines: list[str] = []
        open_lines: list[str] = []
        health_lines: list[str] = []
        down_lines: list[str] = []
        # Per shared answer (a class of alike load balancers): its lines after the lb label.
        fragments: dict[int, tuple[Any, list[str], list[str], str]] = {}
        for lb in snap.config.load_balancers.values():
            active, failed = self.region_states(lb, now)
            fragment = fragments.get(id(active))
            if fragment is None or fragment[0] is not active:
                fragment = fragments[id(active)] = (active, *self._fragment(active, failed))
            name = _label(lb.name)
            head = f'dnsd_lb_active_pool{{lb="{name}",'
            active_lines.append(head + head.join(fragment[1]))
            head = f'dnsd_lb_failed_over{{lb="{name}",'
            failed_lines.append(head + head.join(fragment[2]))
            open_lines.append(f'dnsd_lb_fail_open{{lb="{name}"}} {fragment[3]}\n')
            if self.all_down_rule is not None:
                down_lines.extend(self._all_down(snap.config, lb, name, active))
            if self.health_failed is not None:
                # Cached per class; steered once more only for a class off its first choice.
                by_health = len(self.health_failed(lb, now)) if failed else 0
                health_lines.append(f'{HEALTH_FAILOVER[0]}{{lb="{name}"}} {by_health}.0\n')
        families = [*zip(ACTIVE_FAMILIES, (active_lines, failed_lines, open_lines), strict=True)]
        if self.health_failed is not None:
            families.append((HEALTH_FAILOVER, health_lines))
        if self.all_down_rule is not None:
            families.append((ALL_DOWN, down_lines))
        out: list[str] = []
        for (name, documentation), lines in families:
            out.append(f"# HELP {name} {documentation}\n# TYPE {name} gauge\n")
            out.extend(lines)
        return "".join(out).encode()

    def _all_down(self, config: Any, lb: Any, name: str, active: Mapping[str, str]) -> list[str]:
        """The lb's dnsd_lb_all_down lines: each rule answering some region now, and the
        configured rule (0 while nothing is down), so the series exists before it fires."""
        assert self.all_down_rule is not None
        if not any(path.endswith(")") for path in active.values()):  # no " (fail open)"
            return [f'{ALL_DOWN[0]}{{lb="{name}",rule="{lb.when_all_down}"}} 0.0\n']
        rules = {self.all_down_rule(config, lb, path) for path in active.values()} - {None}
        return [
            f'{ALL_DOWN[0]}{{lb="{name}",rule="{rule}"}} {"1.0" if rule in rules else "0.0"}\n'
            for rule in sorted({*rules, lb.when_all_down})
        ]

    def _fragment(
        self, active: Mapping[str, str], failed: Sequence[str]
    ) -> tuple[list[str], list[str], str]:
        """One class's lines after `{lb="…",` (each load balancer's label goes before
        each), and the fail-open value."""
        off_first = set(failed)
        active_parts: list[str] = []
        failed_parts: list[str] = []
        any_open = False
        for region, chain in active.items():
            pool, fail_open = self.answering_pool(chain)
            any_open = any_open or fail_open
            active_parts.append(f'region="{_label(region)}",pool="{_label(pool or "-")}"}} 1.0\n')
            value = "1.0" if region in off_first else "0.0"
            failed_parts.append(f'region="{_label(region)}"}} {value}\n')
        return active_parts, failed_parts, "1.0" if any_open else "0.0"


def _label(value: str) -> str:
    """A label value escaped as the text format wants it."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value
