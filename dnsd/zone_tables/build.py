"""Zone answer tables, built: every zone's nodes and templates, merged per snapshot (in the
loading thread, or in a thread of their own), patched for a new SOA serial."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterable
from functools import partial
from typing import Final

from dnsd.dnsname import is_below_or_at, labels, parent
from dnsd.rdata import TYPE_A, TYPE_AAAA, TYPE_CNAME, TYPE_DS, target
from dnsd.snapshot import SERIAL_CHANGED, CompiledZone, Snapshot
from dnsd.zone_lookup import Lookup, lookup_in
from dnsd.zone_tables.layout import (
    ENTRY,
    INLINE,
    MAGIC,
    NO_TEMPLATE,
    NODE,
    PROBE,
    PROBE_LABELS,
    PYTHON_NODE,
    PYTHON_QTYPES,
    U16,
    Tables,
    Templates,
    ZoneNodes,
)
from dnsd.zone_tables.packed import packed
from dnsd.zone_tables.templates import compose, lower_key, plain_answer, soa_times, template_of
from dnsd.zone_tables.templates import key as wire_key

log = logging.getLogger("dnsd.zone_tables")


class _Build:
    """A snapshot's tables, built in a thread of their own (work that grows with the
    config never runs on a serving loop); `tables` is None until they are done."""

    def __init__(self, snap: Snapshot, start: bool) -> None:
        self.tables: Tables | None = None
        self._snap = snap
        if start:
            threading.Thread(target=self._run, name="dnsd zone tables", daemon=True).start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            self.tables = merged(self._snap)
        except Exception:  # a bug here costs speed, never answers: Python answers all
            log.exception("zone answer tables not built: the full path answers every query")
        self._snap = None  # type: ignore[assignment]  # not kept alive by its own build


# A snapshot with at most this many names (a few milliseconds of work) gets its tables at
# once wherever it is first asked for them; a bigger one in a thread of their own. Snapshots
# that loading makes (dnsd.loading) have theirs before they serve.
SYNC_NAMES: Final = 500
# A zone's tables may carry another SOA than its own (see zone_tables): which one.
CARRIED_SOA: Final = "answer tables carry the SOA"
# Templates ids, one per zone built (0: none, the PYTHON_NODE's); never reused.
_TEMPLATES_IDS = itertools.count(1)


def ready(snap: Snapshot, background: bool | None = None) -> Tables | None:
    """The snapshot's tables, or None while they are being built (the first call starts
    the build; `background` False: built now, in this thread; None: by size)."""
    if background is None:
        background = sum(len(zone.nodes) for zone in snap.zones.values()) > SYNC_NAMES
    return snap.derived.get("zone tables", lambda: _Build(snap, background)).tables


def merged(snap: Snapshot) -> Tables:
    """Every zone's tables in one mapping; a name below a more specific served zone is
    left to that zone's tables."""
    nodes: dict[bytes, bytes] = {}
    templates: Templates = {}
    apexes = sorted(snap.zones, key=lambda name: name.count("."))
    if len(apexes) == 1:  # one zone: its own nodes, not a copy (9 MiB per 100,000 names)
        only = _zone_nodes(snap, apexes[0])
        return Tables(only.nodes, {only.templates_id: only.templates})
    for name in apexes:  # parents first: a child zone's names replace theirs
        zone_nodes = _zone_nodes(snap, name)
        templates[zone_nodes.templates_id] = zone_nodes.templates
        built = zone_nodes.nodes
        children = [c for c in apexes if c != name and is_below_or_at(c, name)]
        if children:
            keep = {wire_key(c) for c in children}
            for key, value in built.items():
                if not any(key.endswith(k) and _at_label(key, k) for k in keep):
                    nodes[key] = value
        else:
            nodes.update(built.items())
    return Tables(packed(nodes), templates)


def _zone_nodes(snap: Snapshot, name: str) -> ZoneNodes:
    """One served zone's tables, built once per zone object (never mutated once built)."""
    zone = snap.zones[name]
    signed = name in snap.signing
    key = f"answer tables signed={signed}"
    tables = zone.derived.get(key, partial(zone_tables, zone, signed))
    carried = zone.derived.peek(CARRIED_SOA)
    if carried is not None and soa_times(carried) != soa_times(zone.soa.rdata):
        # Handed to a zone with another serial (below) and served again as it is.
        tables = _with_soa(tables, soa_times(carried), soa_times(zone.soa.rdata))
        zone.derived.put(key, tables)
        zone.derived.put(CARRIED_SOA, zone.soa.rdata)
    return tables


def _at_label(key: bytes, suffix: bytes) -> bool:
    """Whether wire name `key` ending in `suffix` ends there at a label boundary."""
    cut = len(key) - len(suffix)
    pos = 0
    while pos < cut:
        pos += key[pos] + 1
    return pos == cut


def zone_tables(zone: CompiledZone, signed: bool) -> ZoneNodes:
    """One zone's tables (see the module's docstring): those of the zone it replaces with
    the new SOA written in, when only the serial changed (dnsd.snapshot.with_serials)."""
    changed = zone.derived.take(SERIAL_CHANGED)
    if signed:
        return ZoneNodes(packed({wire_key(zone.name): PYTHON_NODE}), 0, [])
    if changed is not None:
        source, old_soa, new_soa = changed
        key = f"answer tables signed={signed}"
        before = source.peek(key)
        if before is not None:
            carried = source.peek(CARRIED_SOA) or old_soa
            after = _with_soa(before, soa_times(carried), soa_times(new_soa))
            # The zone it replaces (kept by its snapshot for the next reload to reuse)
            # holds these tables from now on, with the SOA they carry, instead of its
            # own: one copy of a zone's tables whatever serial is served (15 MiB for
            # 100,000 names), patched back if that zone is ever served again.
            source.put(key, after)
            source.put(CARRIED_SOA, new_soa)
            return after
    try:
        return _ZoneBuilder(zone).tables()
    except SharingError:
        log.exception("zone answer tables: every name of the zone built on its own")
        return _ZoneBuilder(zone, check_every=1).tables()


def _with_soa(before: ZoneNodes, old: bytes, new: bytes) -> ZoneNodes:
    """A zone's tables with another SOA serial: every template holding the SOA (negative
    answers, the SOA itself, a chain to it) has the new serial written in. The templates
    that hold none (most) are the same objects; the slots and the templates id stay."""
    if old == new:
        return before
    templates = [t.replace(old, new) if old in t else t for t in before.templates]
    return ZoneNodes(before.nodes.with_replaced(old, new), before.templates_id, templates)


class SharingError(RuntimeError):
    """A plain name's negative answer differs from the others' (a bug: it should not)."""


class _ZoneBuilder:
    """One zone's nodes. Most names are *plain* — no delegation at or above them, no
    wildcard or DNAME, not a name the zone's SOA names — and every plain name shares one
    NODATA template (other types) and one NXDOMAIN template (names below it): made once,
    checked again on a sample of names, and made per name everywhere else."""

    def __init__(self, zone: CompiledZone, check_every: int = 997) -> None:
        self.zone = zone
        self.check_every = check_every
        self.templates: list[bytes] = []
        self.templates_id = next(_TEMPLATES_IDS)
        self._index: dict[bytes, int] = {}
        soa = zone.soa.rdata
        # The names just below the apex that the SOA's names are at or under.
        self._soa_tops = {self._top(lower_key(soa.mname)), self._top(lower_key(soa.rname))}
        self._shared: tuple[int, int] | None = None  # (NODATA, NXDOMAIN) of plain names
        self._plain_seen = 0
        self.python_names: set[str] = set()  # names that are no nodes: Python answers them

    def tables(self) -> ZoneNodes:
        nodes = {wire_key(name): self.node(name) for name in self.zone.nodes}
        for name in self.python_names:
            nodes[wire_key(name)] = PYTHON_NODE
        return ZoneNodes(packed(nodes), self.templates_id, self.templates)

    def node(self, name: str) -> bytes:
        exact_types, below_types = self._types(name)
        # The name's own answers go into its node (one object fewer to reach per query).
        inline = {qtype: self._exact_template(name, qtype) for qtype in exact_types}
        below: dict[int, int] = {}
        if TYPE_CNAME in self.zone.nodes[name].rrsets:
            exact_default = NO_TEMPLATE
            if self._plain(name):  # what is below a plain alias is below any plain name
                below_default = self._plain_below(name)
            else:
                below_default = self._below_default(name, below_types, below)
        elif self._plain(name):
            exact_default, below_default = self._plain_defaults(name)
        else:
            exact_default = self._exact(name, PROBE)
            below_default = self._below_default(name, below_types, below)
        out = bytearray(
            NODE.pack(
                MAGIC,
                0,
                len(inline),
                len(below),
                0,
                exact_default,
                below_default,
                self.templates_id,
            )
        )
        at = len(out) + ENTRY.size * (len(inline) + len(below))
        placed = bytearray()
        for qtype in sorted(inline):
            template = inline[qtype]
            if template is None:
                out += ENTRY.pack(qtype, 0, NO_TEMPLATE)
                continue
            out += ENTRY.pack(qtype, INLINE, at + len(placed))
            placed += U16.pack(len(template)) + template
        for qtype in sorted(below):
            out += ENTRY.pack(qtype, 0, below[qtype])
        return bytes(out + placed)

    def _below_default(self, name: str, below_types: set[int], below: dict[int, int]) -> int:
        probes = [p for label in PROBE_LABELS if (p := _probe_name(self.zone, name, label))]
        if len(probes) != len(PROBE_LABELS):
            return NO_TEMPLATE
        below.update({qtype: self._below(name, probes, qtype) for qtype in below_types})
        return self._below(name, probes, PROBE)

    def _plain(self, name: str) -> bool:
        zone = self.zone
        if zone.nodes[name].lb is not None or ("*." + name if name != "." else "*.") in zone.nodes:
            return False
        if name == zone.name or self._top(name) in self._soa_tops:
            return False  # the SOA's names would be compressed against this one's parents
        if zone.cuts or zone.dnames:
            at = name
            while at != zone.name:
                if at in zone.cuts or at in zone.dnames:
                    return False
                at = parent(at)
            if zone.name in zone.dnames:
                return False
        return True

    def _top(self, name: str) -> str | None:
        """The ancestor-or-self of `name` just below the apex (None: not below it)."""
        if name == self.zone.name or not is_below_or_at(name, self.zone.name):
            return None
        parts = labels(name)
        return ".".join(parts[len(parts) - self.zone.label_count - 1 :]) + "."

    def _plain_defaults(self, name: str) -> tuple[int, int]:
        """The shared (NODATA, NXDOMAIN) templates of plain names."""
        self._plain_seen += 1
        if self._shared is not None and self._plain_seen % self.check_every:
            return self._shared
        made = (self._exact(name, PROBE), self._below_default(name, set(), {}))
        if self._shared is None:
            self._shared = made
        elif made != self._shared:
            raise SharingError(f"{self.zone.name}: {name} answers otherwise than other names")
        return made

    def _plain_below(self, name: str) -> int:
        """The shared NXDOMAIN template for names below a plain name that holds a CNAME
        (its own answers differ from other plain names', what is below it does not)."""
        self._plain_seen += 1
        if self._shared is not None and self._plain_seen % self.check_every:
            return self._shared[1]
        made = self._below_default(name, set(), {})
        if self._shared is not None and made != self._shared[1]:
            raise SharingError(f"{self.zone.name}: below {name} answers otherwise than elsewhere")
        return made

    def _types(self, name: str) -> tuple[set[int], set[int]]:
        """The types that get entries of their own, at the name and below it (the default
        covers the rest: what lookup answers for PROBE it answers for them)."""
        node = self.zone.nodes[name]
        exact = set(node.rrsets)
        if name in self.zone.cuts:  # DS at a delegation: the parent's answer, not a referral
            exact.add(TYPE_DS)
        if node.lb is not None:
            exact |= {TYPE_A, TYPE_AAAA}
        if TYPE_CNAME in node.rrsets:  # a chain: the types at its end (others: Python)
            exact |= {TYPE_A, TYPE_AAAA, *self._chain_end_types(name)}
        wildcard = self.zone.nodes.get("*." + name if name != "." else "*.")
        below: set[int] = set()
        if wildcard is not None:
            below = set(wildcard.rrsets) | {TYPE_A, TYPE_AAAA, TYPE_DS}
            if TYPE_CNAME in wildcard.rrsets:
                below |= self._chain_end_types("*." + name)
        return {t for t in exact if t not in PYTHON_QTYPES}, {
            t for t in below if t not in PYTHON_QTYPES
        }

    def _chain_end_types(self, name: str) -> set[int]:
        seen, types = {name}, set()
        node = self.zone.nodes.get(name)
        while node is not None and TYPE_CNAME in node.rrsets:
            name = target(TYPE_CNAME, node.rrsets[TYPE_CNAME].rdatas[0]) or ""
            if name in seen:
                break
            seen.add(name)
            node = self.zone.nodes.get(name)
            if node is not None:
                types |= set(node.rrsets)
        return types

    def _exact(self, name: str, qtype: int) -> int:
        return self._intern(self._exact_template(name, qtype))

    def _exact_template(self, name: str, qtype: int) -> bytes | None:
        found = lookup_in(self.zone, name, qtype)
        if found.lb is not None:
            return None
        return plain_answer(found) or template_of(compose(name, qtype, found))

    def _below(self, encloser: str, probes: list[str], qtype: int) -> int:
        made = []
        for probe in probes:
            found = lookup_in(self.zone, probe, qtype)
            if found.lb is not None:
                return NO_TEMPLATE
            self._leave_to_python(encloser, probe, found)
            made.append(template_of(compose(probe, qtype, found)))
        if made[0] is None or any(t != made[0] for t in made):
            return NO_TEMPLATE  # the answer depends on the name asked (a DNAME's synthesis)
        return self._intern(made[0])

    def _leave_to_python(self, encloser: str, probe: str, found: Lookup) -> None:
        """A name in the answer below the encloser where no node is (the SOA's rname
        `hostmaster.example.` is one) would be compressed against a query for it or a
        name below it, which a template cannot say: such names (and their parents up to
        the encloser) get nodes that leave them to Python; every other name below the
        encloser takes the template."""
        for name in _names(found):
            if name in (probe, encloser) or not is_below_or_at(name, encloser):
                continue
            while name != encloser and name not in self.zone.nodes:
                self.python_names.add(name)
                name = parent(name)

    def _intern(self, template: bytes | None) -> int:
        if template is None:
            return NO_TEMPLATE
        index = self._index.get(template)
        if index is None:
            index = self._index[template] = len(self.templates)
            self.templates.append(template)
        return index


def _names(found: Lookup) -> Iterable[str]:
    """Every owner and target name an answer holds."""
    for part in found.answer:
        if part.owner is not None:
            yield part.owner
        for rdata in part.rrset.rdatas:
            name = target(part.rrset.rtype, rdata)
            if name:
                yield name
    for rrset in [*found.authority, *found.additional]:
        yield rrset.owner
        for rdata in rrset.rdatas:
            name = target(rrset.rtype, rdata)
            if name:
                yield name
    if found.negative and found.zone is not None:
        soa = found.zone.soa.rdata
        yield from (str(soa.mname).lower(), str(soa.rname).lower())


def _probe_name(zone: CompiledZone, encloser: str, label: bytes) -> str | None:
    name = label.decode() + "." + (encloser if encloser != "." else "")
    return None if name in zone.nodes else name
