"""A drill plan (`dnsd drill run PLAN.yaml`): faults and expectations on the user's own
names, pools and resolvers (docs/drills.md "Drill plans").

Two checks, both reporting every problem as `file:line: path: message`:
* `load_plan` — the plan on its own (keys with a "did you mean", types, vantage names);
* `check_against` — the plan against the live config (`LiveConfig`): names are load balancer
  names, pools, backends and load balancers exist; it also computes each expectation's bound.
Pure: no I/O beyond reading the plan's text, which the caller passes in.
"""

from __future__ import annotations

import difflib
import ipaddress
from dataclasses import dataclass, field
from typing import Any, Literal

from dnsd.config import outage
from dnsd.config.checker import Checker, join
from dnsd.config.yamlio import LineDict, LineList, YamlSyntaxError, load_yaml
from dnsd.errors import Reason

PLAN_KEYS = ("name", "server", "dns", "resolvers", "vantage", "fault_for", "steps")
STEP_KEYS = ("name", "fault", "restore", "expect")
FAULT_KEYS = ("pool", "backend", "trickle", "command", "restore", "breaks")
TRICKLE_KEYS = ("lb", "ratio")
EXPECT_KEYS = ("name", "from", "pool", "backend", "address", "ramp", "within")
WITHIN_WORDS = ("bound", "failback_bound")

FaultKind = Literal["pool", "backend", "trickle", "command"]


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    line: int
    pool: str | None = None  # pool, or the backend's pool
    backend: str | None = None
    lb: str | None = None
    ratio: float | None = None
    command: str | None = None
    restore: str | None = None  # the command that undoes `command`
    # what `command` takes down ("pool" or "pool/backend"): answers naming it do not count
    breaks: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind == "pool":
            return f"pool {self.pool} down"
        if self.kind == "backend":
            return f"backend {self.pool}/{self.backend} down"
        if self.kind == "trickle":
            return f"trickle {self.lb} {self.ratio}"
        return f"command: {self.command}"


@dataclass(frozen=True, slots=True)
class Expectation:
    name: str
    vantage: str | None  # a key of the plan's `vantage`, None: ask as this machine
    line: int
    pools: tuple[str, ...] = ()  # any of these pools (one, usually)
    backend: tuple[str, str] | None = None
    address: str | None = None
    within: str | float = "bound"  # "bound", "failback_bound" or seconds
    # a ramp's destination pool: its share rises in the load balancer's steps (the ramp
    # must begin within `within`); dnsd.drill.ramp_watch measures it
    ramp: str | None = None

    def describe(self) -> str:
        target = (
            f"ramp to pool {self.ramp}"
            if self.ramp
            else f"pool {' or '.join(self.pools)}"
            if self.pools
            else f"backend {'/'.join(self.backend)}"
            if self.backend
            else f"address {self.address}"
        )
        within = self.within if isinstance(self.within, str) else f"{self.within:g}s"
        return f"{self.name} from {self.vantage or 'here'} -> {target} within {within}"


@dataclass(frozen=True, slots=True)
class Step:
    index: int  # 1-based
    line: int
    name: str
    fault: Fault | None
    restore: bool
    expect: tuple[Expectation, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    file: str
    text: str
    name: str
    server: str | None
    dns: str | None
    resolvers: tuple[str, ...]
    vantage: dict[str, str]
    steps: tuple[Step, ...]
    fault_for_s: float | None  # the expiry of injected overrides; None: computed


class PlanError(Exception):
    """The plan is invalid (exit 2): every reason, `file:line: path: message`."""

    def __init__(self, reasons: list[Reason]) -> None:
        self.reasons = tuple(reasons)
        super().__init__("\n".join(str(r) for r in reasons))


def load_plan(text: str, file: str) -> Plan:
    ck = Checker(file)
    try:
        doc = load_yaml(text)
    except YamlSyntaxError as exc:
        raise PlanError([Reason(file, exc.line, "", exc.message)]) from None
    d = ck.mapping(doc, 1, "")
    if d is None:
        raise PlanError(ck.reasons)
    ck.keys(d, "", PLAN_KEYS, ("steps",))
    vantage = _vantage(ck, d)
    steps_raw = d.get("steps")
    steps: list[Step] = []
    if isinstance(steps_raw, LineList) and steps_raw:
        for i, raw in enumerate(steps_raw):
            step = _step(ck, raw, steps_raw.line_of(i), f"steps[{i}]", i + 1, vantage)
            if step is not None:
                steps.append(step)
    elif "steps" in d:
        ck.error(d.line_of("steps"), "steps", "expected a list of steps")
    resolvers = [r for r, _ in ck.get_str_list(d, "resolvers", "", default=[])]
    for r in resolvers:
        _check_addr(ck, d.line_of("resolvers"), "resolvers", r)
    dns = ck.get_str(d, "dns", "", default=None)
    if dns is not None:
        _check_addr(ck, d.line_of("dns"), "dns", dns)
    fault_for = ck.get_duration(d, "fault_for", "", default=None, lo=1.0)
    errors = [r for r in ck.reasons if not r.warning]
    if errors:
        raise PlanError(errors)
    return Plan(
        file=file,
        text=text,
        name=str(ck.get_str(d, "name", "", default="drill")),
        server=ck.get_str(d, "server", "", default=None),
        dns=dns,
        resolvers=tuple(resolvers),
        vantage=vantage,
        steps=tuple(steps),
        fault_for_s=fault_for,
    )


def _check_addr(ck: Checker, line: int, path: str, value: str) -> None:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        ck.error(line, path, f"expected ADDR:PORT, got {value!r}")


def _vantage(ck: Checker, d: LineDict) -> dict[str, str]:
    if "vantage" not in d:
        return {}
    v = ck.mapping(d["vantage"], d.line_of("vantage"), "vantage")
    out: dict[str, str] = {}
    for key, value in (v or {}).items():
        try:
            out[str(key)] = str(ipaddress.ip_network(str(value), strict=False))
        except ValueError:
            line = v.line_of(key) if v is not None else 0
            ck.error(
                line,
                join("vantage", key),
                f"expected a client subnet such as 85.214.0.0/24, got {value!r}",
            )
    return out


def _step(
    ck: Checker, raw: Any, line: int, path: str, index: int, vantage: dict[str, str]
) -> Step | None:
    d = ck.mapping(raw, line, path)
    if d is None:
        return None
    ck.keys(d, path, STEP_KEYS)
    fault = (
        _fault(ck, d["fault"], d.line_of("fault"), join(path, "fault")) if "fault" in d else None
    )
    restore = bool(ck.get_bool(d, "restore", path, default=False))
    if fault is not None and restore:
        ck.error(d.line_of("restore"), path, "a step injects a fault or restores, not both")
    expect: list[Expectation] = []
    raw_expect = d.get("expect", LineList())
    if not isinstance(raw_expect, LineList):
        ck.error(d.line_of("expect"), join(path, "expect"), "expected a list of expectations")
    else:
        for i, item in enumerate(raw_expect):
            e = _expectation(ck, item, raw_expect.line_of(i), f"{path}.expect[{i}]", vantage)
            if e is not None:
                expect.append(e)
    label = ck.get_str(d, "name", path, default=None)
    if label is None:
        label = fault.describe() if fault else "restore" if restore else f"step {index}"
    return Step(index, d.line, str(label), fault, restore, tuple(expect))


def _fault(ck: Checker, raw: Any, line: int, path: str) -> Fault | None:
    d = ck.mapping(raw, line, path)
    if d is None:
        return None
    ck.keys(d, path, FAULT_KEYS)
    kinds = [k for k in ("pool", "backend", "trickle", "command") if k in d]
    if len(kinds) != 1:
        ck.error(d.line, path, "a fault is one of pool, backend, trickle or command")
        return None
    kind = kinds[0]
    for key in ("restore", "breaks"):
        if key in d and kind != "command":
            ck.error(d.line_of(key), join(path, key), f"{key} goes with command")
    if kind == "pool":
        return Fault("pool", d.line_of("pool"), pool=ck.get_str(d, "pool", path))
    if kind == "backend":
        ref = str(ck.get_str(d, "backend", path))
        pool, _, backend = ref.partition("/")
        if not pool or not backend:
            ck.error(
                d.line_of("backend"), join(path, "backend"), f"expected POOL/BACKEND, got {ref!r}"
            )
        return Fault("backend", d.line_of("backend"), pool=pool, backend=backend)
    if kind == "trickle":
        t = ck.mapping(d["trickle"], d.line_of("trickle"), join(path, "trickle"))
        if t is None:
            return None
        ck.keys(t, join(path, "trickle"), TRICKLE_KEYS, TRICKLE_KEYS)
        lb = ck.get_str(t, "lb", join(path, "trickle"), default=None)
        ratio = ck.get_float(t, "ratio", join(path, "trickle"), default=None, lo=0.0, hi=1.0)
        return Fault("trickle", d.line_of("trickle"), lb=lb, ratio=ratio)
    command = ck.get_str(d, "command", path)
    restore = ck.get_str(d, "restore", path, default=None)
    if restore is None:
        ck.error(d.line, path, 'a command fault needs "restore" (the command that undoes it)')
    breaks = tuple(b for b, _ in ck.get_str_list(d, "breaks", path, default=[]))
    return Fault("command", d.line_of("command"), command=command, restore=restore, breaks=breaks)


def _expectation(
    ck: Checker, raw: Any, line: int, path: str, vantage: dict[str, str]
) -> Expectation | None:
    d = ck.mapping(raw, line, path)
    if d is None:
        return None
    ck.keys(d, path, EXPECT_KEYS, ("name",))
    targets = [k for k in ("pool", "backend", "address", "ramp") if k in d]
    if len(targets) != 1:
        ck.error(d.line, path, "an expectation names one of pool, backend, address or ramp")
    where = ck.get_str(d, "from", path, default=None)
    if where is not None and where not in vantage:
        hint = _hint(where, vantage)
        known = ", ".join(vantage) or "none: add a vantage map"
        ck.error(
            d.line_of("from"),
            join(path, "from"),
            f"no vantage point {where!r}{hint} (known: {known})",
        )
    within: str | float = "bound"
    if "within" in d:
        value = d["within"]
        if isinstance(value, str) and value in WITHIN_WORDS:
            within = value
        else:
            seconds = ck.get_duration(d, "within", path, default=None, lo=0.0)
            if seconds is None:
                hint = _hint(str(value), WITHIN_WORDS)
                ck.error(
                    d.line_of("within"),
                    join(path, "within"),
                    f"bound, failback_bound or seconds{hint}",
                )
            else:
                within = seconds
    backend = None
    if "backend" in d:
        pool, _, name = str(d["backend"]).partition("/")
        if not pool or not name:
            ck.error(d.line_of("backend"), join(path, "backend"), "expected POOL/BACKEND")
        backend = (pool, name)
    address = ck.get_str(d, "address", path, default=None)
    if address is not None:
        try:
            address = str(ipaddress.ip_address(address))
        except ValueError:
            ck.error(d.line_of("address"), join(path, "address"), f"not an IP address: {address!r}")
    return Expectation(
        name=str(ck.get_str(d, "name", path)).rstrip(".").lower(),
        vantage=where,
        line=d.line,
        pools=tuple(p for p, _ in ck.get_str_list(d, "pool", path, default=[])),
        backend=backend,
        address=address,
        within=within,
        ramp=ck.get_str(d, "ramp", path, default=None),
    )


def _hint(value: str, choices: Any) -> str:
    hint = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.5)
    return f' (did you mean "{hint[0]}"?)' if hint else ""


# -- the plan against the live config --------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MonitorTiming:
    interval_s: float
    timeout_s: float
    healthy_threshold: int
    unhealthy_threshold: int

    @property
    def detect_s(self) -> float:
        return outage.detect_s(self.interval_s, self.unhealthy_threshold, self.timeout_s)

    @property
    def recover_s(self) -> float:
        return outage.detect_s(self.interval_s, self.healthy_threshold, self.timeout_s)


@dataclass
class LiveConfig:
    """What a running dnsd says about itself (status document + explain answers)."""

    pools: dict[str, dict[str, str]]  # pool → backend name → address
    timing: dict[str, MonitorTiming | None]  # pool → its monitor (None: not monitored)
    lbs: set[str]
    # load balancer → its ramp (duration_s, steps); absent: no ramp
    ramps: dict[str, tuple[float, int]] = field(default_factory=dict)
    # (name, vantage) → explain: the load balancer, its TTL, the pools it may answer from
    names: dict[tuple[str, str | None], NameInfo] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NameInfo:
    lb: str | None
    ttl_s: float
    pools: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Bound:
    """An expectation's bound and how it was made (shown next to the measured time)."""

    seconds: float
    formula: str
    ttl_s: float | None = None
    interval_s: float | None = None
    threshold: int | None = None  # unhealthy_threshold (failback: healthy_threshold)


def bound_for(e: Expectation, live: LiveConfig) -> Bound:
    """docs/health.md, docs/drills.md: a failover shows within interval × unhealthy_threshold +
    timeout + TTL of the slowest monitor among the pools the name may answer from; a
    failback within interval × healthy_threshold + timeout + TTL."""
    if not isinstance(e.within, str):
        return Bound(e.within, f"{e.within:g}s (given)")
    info = live.names.get((e.name, e.vantage)) or NameInfo(None, 0.0, ())
    involved = set(info.pools) | set(e.pools) | {p for p in (e.ramp,) if p}
    involved |= {e.backend[0]} if e.backend else set()
    timings = [t for p in sorted(involved) if (t := live.timing.get(p)) is not None]
    failback = e.within == "failback_bound"
    if not timings:
        return Bound(info.ttl_s, f"TTL {info.ttl_s:g}s (no monitor)", info.ttl_s)
    t = max(timings, key=lambda m: m.recover_s if failback else m.detect_s)
    threshold = t.healthy_threshold if failback else t.unhealthy_threshold
    seconds = (
        info.ttl_s + t.recover_s
        if failback
        else outage.worst_case_s(info.ttl_s, t.interval_s, t.unhealthy_threshold, t.timeout_s)
    )
    formula = f"{t.interval_s:g}s × {threshold} + {t.timeout_s:g}s + TTL {info.ttl_s:g}s"
    return Bound(seconds, formula, info.ttl_s, t.interval_s, threshold)


def check_against(plan: Plan, live: LiveConfig) -> list[Reason]:
    """Every name, pool, backend and load balancer the plan uses must exist."""
    reasons: list[Reason] = []

    def error(line: int, path: str, message: str) -> None:
        reasons.append(Reason(plan.file, line, path, message))

    def pool_ok(pool: str | None, line: int, path: str) -> bool:
        if pool in live.pools:
            return True
        error(line, path, f"no pool {pool!r} in the running config{_hint(str(pool), live.pools)}")
        return False

    for step in plan.steps:
        path = f"steps[{step.index - 1}]"
        f = step.fault
        if (
            f is not None
            and f.kind in ("pool", "backend")
            and pool_ok(f.pool, f.line, f"{path}.fault.{f.kind}")
            and f.kind == "backend"
        ):
            backends = live.pools[str(f.pool)]
            if f.backend not in backends:
                error(
                    f.line,
                    f"{path}.fault.backend",
                    f"no backend {f.backend!r} in pool {f.pool!r}{_hint(str(f.backend), backends)}",
                )
        for ref in f.breaks if f is not None else ():
            pool, _, backend = ref.partition("/")
            line = f.line if f is not None else 0
            if pool_ok(pool, line, f"{path}.fault.breaks") and backend not in (
                "",
                *live.pools[pool],
            ):
                error(line, f"{path}.fault.breaks", f"no backend {backend!r} in pool {pool!r}")
        if f is not None and f.kind == "trickle" and f.lb not in live.lbs:
            error(
                f.line,
                f"{path}.fault.trickle.lb",
                f"no load balancer {f.lb!r}{_hint(str(f.lb), live.lbs)}",
            )
        for i, e in enumerate(step.expect):
            epath = f"{path}.expect[{i}]"
            info = live.names.get((e.name, e.vantage))
            if info is None or info.lb is None:
                error(
                    e.line,
                    f"{epath}.name",
                    f"{e.name!r} is not a load-balanced name of the running config",
                )
            for pool in e.pools:
                pool_ok(pool, e.line, f"{epath}.pool")
            if e.ramp is not None:
                pool_ok(e.ramp, e.line, f"{epath}.ramp")
                if info is not None and info.lb is not None and info.lb not in live.ramps:
                    error(
                        e.line,
                        f"{epath}.ramp",
                        f"load balancer {info.lb!r} ({e.name}) has no ramp: its answers move "
                        "at once (give it ramp: {duration, steps}, docs/steering.md)",
                    )
            if e.backend is not None and pool_ok(e.backend[0], e.line, f"{epath}.backend"):
                backends = live.pools[e.backend[0]]
                if e.backend[1] not in backends:
                    error(
                        e.line,
                        f"{epath}.backend",
                        f"no backend {e.backend[1]!r} in pool {e.backend[0]!r}{_hint(e.backend[1], backends)}",
                    )
    return reasons


def expected_addresses(e: Expectation, live: LiveConfig) -> frozenset[str]:
    """The answers that fulfil the expectation: any non-empty subset of these."""
    pools = e.pools or ((e.ramp,) if e.ramp else ())
    if pools:
        return frozenset(a for p in pools for a in live.pools.get(p, {}).values())
    if e.backend is not None:
        address = live.pools.get(e.backend[0], {}).get(e.backend[1])
        return frozenset({address} if address else ())
    return frozenset({e.address} if e.address else ())


def fault_for_s(plan: Plan, bounds: dict[tuple[int, int], Bound], ramps_s: float = 0.0) -> float:
    """How long an injected override lives unless restored: the plan's `fault_for`, or
    the longest the whole drill can take (every step's longest bound + its slack, and the
    ramps it watches, `ramps_s`) + 60 s."""
    if plan.fault_for_s is not None:
        return plan.fault_for_s
    total = 0.0
    for step in plan.steps:
        longest = max((b.seconds for (s, _), b in bounds.items() if s == step.index), default=0.0)
        total += longest + 5.0
    return total + ramps_s + 60.0
