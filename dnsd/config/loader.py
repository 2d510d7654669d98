"""Load a configuration directory: read every *.yaml, validate, check cross-references.

`load_config(dir)` returns the Config and the warnings, or raises ConfigError holding
every error (and the warnings) found in every file. It touches no shared state, so a
server may run it in a worker thread and swap the result in only when it succeeded.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from dnsd.atomic_files import WriteFailed, recover
from dnsd.config.answer_pools import check_answer_pools
from dnsd.config.catalog import fill_catalogs
from dnsd.config.checker import Checker
from dnsd.config.files import UnsafeFile, read_config_file
from dnsd.config.global_sections import Section, parse_sections
from dnsd.config.lb_records import check_lb_records
from dnsd.config.model import LB_PREFIX, ClientNetwork, ClientZone, Config, LoadBalancer, Zone
from dnsd.config.outage import name_budgets, outage_budget
from dnsd.config.refs import Ref
from dnsd.config.yamlio import LineDict, YamlSyntaxError, load_yaml
from dnsd.config.zone_section import ZONE_KEYS, LbUse, parse_zone
from dnsd.config.zonefile import LoadCancelled, cancel_check
from dnsd.errors import ConfigError, Reason
from dnsd.process_tools import gc_paused

GLOBAL_KEYS = (
    "monitors",
    "pools",
    "load_balancers",
    "client_zones",
    "client_networks",
    "tsig_keys",
)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FileResult:
    """What one file contributes, checked on its own: reusable while its text is the same."""

    digest: bytes
    zone: Zone | None
    lb_uses: tuple[LbUse, ...]
    section: Section | None
    reasons: tuple[Reason, ...]


# A file whose meaning depends on other files (a zone file, CA certificates, a TSIG secret
# or the environment) is parsed again on every load.
_REFERS_OUT = re.compile(r"\b(?:file|ca_file|secret_file|secret_env)\s*:")


class ParseCache:
    """Per file name, the last result and the digest of the text it came from (a reload
    parses only the files whose content changed; the merge and cross-checks run again)."""

    def __init__(self) -> None:
        self.files: dict[str, FileResult] = {}
        self.parsed = 0  # files parsed by the last load (the rest came from here)

    def copy(self) -> ParseCache:
        """A cache of its own holding the same results (they are never changed): a config
        write checks its change with it and leaves the server's cache as the last load
        left it. One C call: safe while a reload's thread changes the original."""
        other = ParseCache()
        other.files = self.files.copy()
        return other


def load_config(
    directory: str | Path,
    overlay: Mapping[str, str | None] | None = None,
    cache: ParseCache | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[Config, list[Reason]]:
    """`overlay`: file name → the text to use instead of the file's (None: as if the file
    were gone), so a proposed change is checked as the whole directory it would make
    before anything is written (the config API, dnsd.provision). `cache`: reuse the
    results of files whose text did not change since the load that filled it.
    `cancelled`: looked at between files and while a zone file is read; once it returns
    True the load stops with LoadCancelled (a stopping server does not finish it)."""
    check = cancelled or (lambda: False)
    token = cancel_check.set(check)
    try:
        with gc_paused():
            return _load_config(Path(directory), overlay, cache, check)
    finally:
        cancel_check.reset(token)


def _load_config(
    directory: Path,
    overlay: Mapping[str, str | None] | None,
    cache: ParseCache | None,
    cancelled: Callable[[], bool],
) -> tuple[Config, list[Reason]]:
    overlay = overlay or {}
    if not directory.is_dir():
        raise ConfigError([Reason(str(directory), 0, "", "not a directory")])
    try:  # a config write that was interrupted is finished or undone first
        recover(directory)
    except (WriteFailed, OSError) as exc:
        raise ConfigError(
            [
                Reason(
                    str(directory),
                    0,
                    "",
                    f"an interrupted config write could not be finished: {exc}",
                )
            ]
        ) from None
    present = {p.name for p in directory.glob("*.yaml")} | set(overlay)
    files = sorted(directory / n for n in present if overlay.get(n, "") is not None)
    if not files:
        raise ConfigError([Reason(str(directory), 0, "", "no *.yaml files in the directory")])
    reasons: list[Reason] = []
    zones: list[Zone] = []
    lb_uses: list[LbUse] = []
    sections: list[tuple[str, Section]] = []
    parsed = 0
    for path in files:
        if cancelled():
            raise LoadCancelled
        result = _file_result(directory, path, overlay.get(path.name), cache)
        parsed += cache is None or cache.files.get(path.name) is not result
        if cache is not None:
            cache.files[path.name] = result
        if result.zone is not None:
            zones.append(result.zone)
        lb_uses.extend(result.lb_uses)
        if result.section is not None:
            sections.append((str(path), result.section))
        reasons.extend(result.reasons)
    if cache is not None:
        cache.parsed = parsed
        for gone in set(cache.files) - {p.name for p in files}:
            del cache.files[gone]
    config = fill_catalogs(_merge(zones, sections, reasons), reasons)
    _check_references(config, sections, lb_uses, reasons)
    errors = [r for r in reasons if not r.warning]
    if errors:
        raise ConfigError(reasons)
    return config, reasons


def _file_result(
    directory: Path, path: Path, text: str | None, cache: ParseCache | None
) -> FileResult:
    ck = Checker(str(path))
    try:
        if text is None:
            text = read_config_file(directory, path)
    except UnsafeFile as exc:
        ck.error(0, "", str(exc))
    except UnicodeDecodeError:
        ck.error(0, "", "cannot read: not UTF-8 text")
    except OSError as exc:
        ck.error(0, "", f"cannot read: {exc.strerror or type(exc).__name__}")
    if text is None:
        return FileResult(b"", None, (), None, tuple(ck.reasons))
    digest = hashlib.sha256(text.encode()).digest()
    known = cache.files.get(path.name) if cache is not None else None
    if known is not None and known.digest == digest and not _REFERS_OUT.search(text):
        return known
    zone: Zone | None = None
    uses: list[LbUse] = []
    section: Section | None = None
    try:
        doc = load_yaml(text)
    except YamlSyntaxError as exc:
        ck.error(exc.line, "", exc.message)
    else:
        if doc is None:
            ck.warn(0, "", "empty file")
        elif (d := ck.mapping(doc, 1, "")) is not None:
            ck.keys(d, "", (*ZONE_KEYS, *GLOBAL_KEYS))
            if "zone" in d:
                zone, uses = parse_zone(ck, d)
            elif any(k in d for k in ("records", "soa", "ttl")):
                ck.error(d.line, "zone", 'records need a "zone" name in the same file')
            section = parse_sections(ck, d)
    return FileResult(digest, zone, tuple(uses), section, tuple(ck.reasons))


def _merge(zones: list[Zone], sections: list[tuple[str, Section]], reasons: list[Reason]) -> Config:
    seen_zones: dict[str, Zone] = {}
    for zone in zones:
        if zone.name in seen_zones:
            reasons.append(
                Reason(
                    zone.file,
                    0,
                    "zone",
                    f"zone {zone.name} is also defined in {seen_zones[zone.name].file}",
                )
            )
        else:
            seen_zones[zone.name] = zone
    client_zones = _unique_networks(
        "client_zones", [(f, s.client_zones) for f, s in sections], reasons
    )
    client_networks = _unique_networks(
        "client_networks", [(f, s.client_networks) for f, s in sections], reasons
    )
    return Config(
        zones=tuple(seen_zones.values()),
        monitors=_unique("monitors", [(f, s.monitors) for f, s in sections], reasons),
        pools=_unique("pools", [(f, s.pools) for f, s in sections], reasons),
        load_balancers=_unique(
            "load_balancers", [(f, s.load_balancers) for f, s in sections], reasons
        ),
        client_zones=tuple(client_zones),
        client_networks=tuple(client_networks),
        tsig_keys=_unique("tsig_keys", [(f, s.tsig_keys) for f, s in sections], reasons),
    )


N = TypeVar("N", ClientZone, ClientNetwork)


def _unique_networks(
    section: str, per_file: list[tuple[str, list[tuple[N, int]]]], reasons: list[Reason]
) -> list[N]:
    """Merge a network table across files: overlapping networks are fine (the longest
    prefix wins), the same network twice is an error naming both places."""
    merged: list[N] = []
    seen: dict[str, str] = {}
    for file, entries in per_file:
        for entry, line in entries:
            key = str(entry.network)
            if key in seen:
                message = f"network also mapped at {seen[key]}"
                reasons.append(Reason(file, line, f"{section}.{key}", message))
                continue
            seen[key] = f"{file}:{line}"
            merged.append(entry)
    return merged


def _unique(
    section: str, per_file: list[tuple[str, dict[str, tuple[T, int]]]], reasons: list[Reason]
) -> MappingProxyType[str, T]:
    """Merge one global section across files; a name defined twice is an error naming both."""
    merged: dict[str, T] = {}
    where: dict[str, str] = {}
    for file, entries in per_file:
        for name, (value, line) in entries.items():
            if name in merged:
                reasons.append(
                    Reason(
                        file,
                        line,
                        f"{section}.{name}",
                        f"duplicate name: also defined at {where[name]}",
                    )
                )
                continue
            merged[name] = value
            where[name] = f"{file}:{line}"
    return MappingProxyType(merged)


def _check_references(
    config: Config,
    sections: list[tuple[str, Section]],
    lb_uses: list[LbUse],
    reasons: list[Reason],
) -> None:
    refs: list[Ref] = [ref for _, s in sections for ref in s.refs]
    used_pools: set[str] = set()
    used_monitors: set[str] = set()
    used_lbs: set[str] = set()
    for ref in refs:
        if ref.kind == "monitor":
            used_monitors.add(ref.name)
            if ref.name not in config.monitors:
                reasons.append(
                    Reason(
                        ref.file,
                        ref.line,
                        ref.path,
                        f"undefined monitor {ref.name!r}{_hint(ref.name, config.monitors)}",
                    )
                )
        elif ref.name.startswith(LB_PREFIX):
            inner = ref.name[len(LB_PREFIX) :]
            used_lbs.add(inner)
            if inner not in config.load_balancers:
                reasons.append(
                    Reason(
                        ref.file,
                        ref.line,
                        ref.path,
                        f"undefined load balancer {inner!r}{_hint(inner, config.load_balancers)}",
                    )
                )
        else:
            used_pools.add(ref.name)
            if ref.name not in config.pools:
                reasons.append(
                    Reason(
                        ref.file,
                        ref.line,
                        ref.path,
                        f"undefined pool {ref.name!r}{_hint(ref.name, config.pools)}",
                    )
                )
    for use in lb_uses:
        used_lbs.add(use.lb)
        if use.lb not in config.load_balancers:
            reasons.append(
                Reason(
                    use.file,
                    use.line,
                    use.path,
                    f"undefined load balancer {use.lb!r}{_hint(use.lb, config.load_balancers)}",
                )
            )
    where = {
        (kind, name): (file, line)
        for file, section in sections
        for kind, table in (("lb", section.load_balancers), ("pool", section.pools))
        for name, (_, line) in table.items()
    }
    _check_transfer_keys(config, reasons)
    _check_cycles(config.load_balancers, where, reasons)
    _check_proximity(config, where, reasons)
    _check_waterfall(config, where, reasons)
    _check_outage_budgets(config, reasons)
    reasons.extend(check_answer_pools(config))
    reasons.extend(check_lb_records(config))
    unused = (
        ("pools", used_pools, "pool is not used by any load balancer"),
        ("monitors", used_monitors, "monitor is not used by any pool"),
        ("load_balancers", used_lbs, "load balancer is not used by any record"),
    )
    for file, section in sections:
        for key, used, message in unused:
            table: dict[str, tuple[object, int]] = getattr(section, key)
            for name, (_, line) in table.items():
                if name not in used:
                    reasons.append(Reason(file, line, f"{key}.{name}", message, warning=True))


Where = dict[tuple[str, str], tuple[str, int]]


def _check_transfer_keys(config: Config, reasons: list[Reason]) -> None:
    for zone in config.zones:
        for name in zone.transfer.keys if zone.transfer else ():
            if name not in config.tsig_keys:
                hint = _hint(name, config.tsig_keys)
                reasons.append(
                    Reason(zone.file, 0, "transfer.keys", f"undefined TSIG key {name!r}{hint}")
                )
        for i, grant in enumerate(zone.update or ()):
            if grant.key not in config.tsig_keys:
                hint = _hint(grant.key, config.tsig_keys)
                reasons.append(
                    Reason(
                        zone.file, 0, f"update[{i}].key", f"undefined TSIG key {grant.key!r}{hint}"
                    )
                )


def _check_cycles(lbs: Mapping[str, LoadBalancer], where: Where, reasons: list[Reason]) -> None:
    """Nested load balancers (`lb:NAME`) must not refer back to themselves (docs/steering.md, nesting)."""
    reported: set[frozenset[str]] = set()
    for name in lbs:
        _visit(lbs, name, [name], reported, where, reasons)


def _visit(
    lbs: Mapping[str, LoadBalancer],
    name: str,
    trail: list[str],
    reported: set[frozenset[str]],
    where: Where,
    reasons: list[Reason],
) -> None:
    # A function of its own, not a closure calling itself: that closure and its cell form
    # a cycle, which the load's gc.freeze() (dnsd.process_tools.loading) would keep with
    # `where` for good, a few MiB more on every reload of a big configuration.
    lb = lbs.get(name)
    if lb is None:
        return
    for ref in lb.pool_refs():
        if not ref.startswith(LB_PREFIX):
            continue
        inner = ref[len(LB_PREFIX) :]
        if inner in trail:
            loop = [*trail[trail.index(inner) :], inner]
            key = frozenset(loop)
            if key not in reported:
                reported.add(key)
                file, line = where.get(("lb", loop[0]), (lbs[loop[0]].file, 0))
                reasons.append(
                    Reason(
                        file,
                        line,
                        f"load_balancers.{loop[0]}",
                        "nested load balancers form a cycle: " + " -> ".join(loop),
                    )
                )
            continue
        _visit(lbs, inner, [*trail, inner], reported, where, reasons)


def _check_proximity(config: Config, where: Where, reasons: list[Reason]) -> None:
    for lb in config.load_balancers.values():
        if lb.steering != "proximity":
            continue
        for ref in lb.pool_refs():
            if ref == lb.fallback_pool and not lb.listed(ref):
                continue  # the fallback pool is never ranked by distance (docs/steering.md, proximity)
            pool = config.pools.get(ref)
            if pool is not None and (pool.latitude is None or pool.longitude is None):
                file, line = where.get(("pool", pool.name), (pool.file, 0))
                message = (
                    f"load balancer {lb.name!r} uses proximity steering: "
                    "the pool needs latitude and longitude"
                )
                reasons.append(Reason(file, line, f"pools.{pool.name}", message))


def _check_waterfall(config: Config, where: Where, reasons: list[Reason]) -> None:
    """`overflow: waterfall` where no pool has a `capacity`: nothing can spill (a warning)."""
    for lb in config.load_balancers.values():
        pools = [config.pools.get(ref) for ref in lb.pool_refs()]
        if lb.overflow == "waterfall" and not any(p and p.capacity for p in pools):
            file, line = where.get(("lb", lb.name), (lb.file, 0))
            message = "overflow: waterfall, but none of its pools has a capacity: nothing spills"
            reasons.append(
                Reason(file, line, f"load_balancers.{lb.name}.overflow", message, warning=True)
            )


def _check_outage_budgets(config: Config, reasons: list[Reason]) -> None:
    """`max_outage`: the computed worst case must not be above it (docs/steering.md, the
    outage budget)."""
    for lb in config.load_balancers.values():
        if lb.max_outage_s is None:
            continue
        budget = outage_budget(config, lb.name)
        if not budget.exceeded:
            continue
        if budget.seconds is None:
            message = (
                f"max_outage {lb.max_outage_s:g}s cannot hold: no pool it answers from is "
                "probed (no probes: an outage is never detected); give the pools a monitor"
            )
        else:
            message = (
                f"the worst-case outage {budget.seconds:g}s ({budget.formula}) is above "
                f"max_outage {lb.max_outage_s:g}s: lower the TTL, the monitor's interval, "
                "unhealthy_threshold or timeout, or raise max_outage"
            )
        path = f"load_balancers.{lb.name}.max_outage"
        reasons.append(Reason(lb.file, lb.max_outage_line, path, message))


def _hint(name: str, known: object) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)  # type: ignore[call-overload]
    return f' (did you mean "{close[0]}"?)' if close else ""


def check_directory(directory: str | Path) -> list[Reason]:
    """Every reason (errors and warnings) for a directory; empty when all is well."""
    return check_report(directory)[0]


def check_report(directory: str | Path) -> tuple[list[Reason], list[str]]:
    """`dnsd check`: every reason, and for a valid config a line per load-balanced name
    with its worst-case outage (docs/steering.md, the outage budget)."""
    try:
        config, warnings = load_config(directory)
    except ConfigError as exc:
        return list(exc.reasons), []
    lines = [f"{owner} (lb {b.lb}): outage budget {b.text()}" for owner, b in name_budgets(config)]
    return warnings, lines


__all__ = ["LineDict", "LoadCancelled", "check_directory", "check_report", "load_config"]
