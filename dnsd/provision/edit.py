"""Turn config changes into new YAML texts, keeping everything they do not touch.

The loader (`dnsd.config.yamlio`) stays the one reader of the configuration; writing goes
through ruamel.yaml's round-trip mode, the standard Python library for editing YAML while
keeping comments, key order and quoting of the entries a change does not touch. Where a
new entry goes: into the file that already holds its section (the first such file in name
order), else into `provisioned.yaml`; a backend into its pool; a record into the file
whose `zone:` it belongs to; a new zone into a new file of its own, `ZONE.yaml`.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from dnsd.config.loader import GLOBAL_KEYS
from dnsd.config.names import absolute
from dnsd.config.yamlio import YamlSyntaxError, compose_marked, load_yaml
from dnsd.config.zone_section import SOA_KEYS
from dnsd.provision.targets import SECTIONS, Change, Target

NEW_FILE = "provisioned.yaml"
FLOW_WIDTH = 100  # a record or backend this short stays on one line: {A: [192.0.2.1]}
MAX_FILES = 10_000  # YAML files of a directory that are read (and so: zones made by the API)
# Keys of a zone's file that are not the zone's own settings (`zones/Z`): its name, its
# records (`zones/Z/records/NAME`) and the global sections (their own routes).
NOT_ZONE_SETTINGS = ("zone", "records", *GLOBAL_KEYS)
# The zone names the config API makes a file for: LDH labels (and `_`), so that the file
# name `ZONE.yaml` is as plain as the zone's. Any other zone is written by hand.
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
NEW_ZONE_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
SPLICE_MIN = 64 << 10  # a file this big has a one-line record changed in its text (below)


class ChangeRefused(Exception):
    """A change that is not made: HTTP-like status, a message and every reason."""

    def __init__(self, status: int, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.errors = errors or [message]


@dataclass(frozen=True, slots=True)
class Place:
    """Where an entry lives: the file, its container (mapping or list) and its key."""

    file: str
    container: Any
    key: Any


def find(docs: Mapping[str, Any], target: Target) -> Place | None:
    """The entry `target` names in documents loaded by either YAML reader (both give
    dicts and lists), or None."""
    if target.kind in SECTIONS:
        section = SECTIONS[target.kind]
        for file, doc in docs.items():
            table = doc.get(section) if isinstance(doc, dict) else None
            if isinstance(table, dict):
                for key in table:
                    if str(key) == target.name:
                        return Place(file, table, key)
        return None
    if target.kind == "backend":
        pool = find(docs, Target("pool", target.names[:1]))
        entry = pool.container[pool.key] if pool else None
        backends = entry.get("backends") if isinstance(entry, dict) else None
        for i, item in enumerate(backends if isinstance(backends, list) else ()):
            if isinstance(item, dict) and str(item.get("name")) == target.name:
                return Place(pool.file, backends, i)  # type: ignore[union-attr]
        return None
    zone = zone_file(docs, target.names[0])
    records = docs[zone].get("records") if zone else None
    if isinstance(records, dict):
        origin = target.names[0] + "."
        wanted = absolute(target.name, origin)
        for key in records:
            if absolute(str(key), origin) == wanted:
                return Place(zone, records, key)  # type: ignore[arg-type]
    return None


def new_zone_settings(
    zone: str, soa: Mapping[str, Any] | None = None, nameservers: list[str] | None = None
) -> dict[str, Any]:
    """The settings of a zone made by a tool (octoDNS): `soa:` as given, the rest from
    defaults — mname the first of the zone's NS names (else `ns1.ZONE.`), rname
    `hostmaster.ZONE.`, the serial dnsd's own (`auto`), the timers dnsd's defaults.
    ValueError for a key `soa:` does not have."""
    given = dict(soa or {})
    unknown = sorted(str(k) for k in given if k not in SOA_KEYS)
    if unknown:
        raise ValueError(f"soa: unknown keys {unknown} (known: {', '.join(SOA_KEYS)})")
    origin = zone.rstrip(".") + "."
    defaults = {"mname": (nameservers or [f"ns1.{origin}"])[0], "rname": f"hostmaster.{origin}"}
    return {"soa": {**defaults, **given}}


def lookup(docs: Mapping[str, Any], target: Target) -> Any:
    """The entry `target` names (as the documents hold it), or None."""
    if target.kind == "zone":
        file = zone_file(docs, target.name)
        return None if file is None else zone_settings(docs[file])
    place = find(docs, target)
    return None if place is None else place.container[place.key]


def zone_settings(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A zone's own settings (`ttl`, `soa`, `transfer`, ...): its file without the name,
    the records and the global sections."""
    return {k: v for k, v in doc.items() if str(k) not in NOT_ZONE_SETTINGS}


def zone_file(docs: Mapping[str, Any], zone: str) -> str | None:
    for file, doc in docs.items():
        if isinstance(doc, dict) and str(doc.get("zone", "")).lower().rstrip(".") == zone:
            return file
    return None


def plain(value: Any) -> Any:
    """An entry as JSON data (dict subclasses and YAML scalars to plain JSON types)."""
    return json.loads(json.dumps(value, default=str))


def _yaml() -> YAML:
    yaml = YAML()  # round-trip
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long value onto a second line
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


class Editor:
    """The directory's texts and the round-trip documents of the files changes touch.

    `read`: every file as the loader reads it (dicts and lists, never changed here). With
    it, an entry is looked up there and only the file that holds it (or receives it) is
    loaded round-trip: ruamel.yaml takes about a second per 2,000 records, so loading
    every file made one write beside a 40,000-record zone take most of a minute. Without
    it every file is loaded round-trip, as before."""

    def __init__(self, texts: Mapping[str, str], read: Mapping[str, Any] | None = None) -> None:
        self.texts = dict(texts)
        self._read = read
        self._docs: dict[str, Any] = {}
        self.changed: set[str] = set()
        # Files changed as text (a one-line record of a big file): the new text's digest
        # and the loader's reading of it, checked to differ from the old only there.
        self.read_back: dict[str, tuple[bytes, Any]] = {}

    def docs(self) -> dict[str, Any]:
        """Every file, in name order: its round-trip document when it is loaded (or
        `read` is not given), else as `read` has it; files made by a change come last."""
        if self._read is None:
            for file in sorted(self.texts):
                self._doc(file)
            return self._docs
        view = {
            f: self._docs[f]
            if f in self._docs
            else self.read_back[f][1]
            if f in self.read_back
            else self._read.get(f)
            for f in sorted(self.texts)
        }
        view.update((f, d) for f, d in self._docs.items() if f not in view)
        return view

    @property
    def loaded(self) -> set[str]:
        """The files loaded round-trip so far."""
        return set(self._docs)

    def _find(self, target: Target) -> Place | None:
        """The entry in a round-trip document (so that it can be changed), or None."""
        place = find(self.docs(), target)
        if place is None or place.file in self._docs:
            return place
        again = find({place.file: self._doc(place.file)}, target)
        if again is None:  # the two readers disagree about this file: ask every file
            self._read = None
            return find(self.docs(), target)
        return again

    def _doc(self, file: str) -> Any:
        if file not in self._docs:
            try:
                doc = _yaml().load(self.texts.get(file, ""))
            except YAMLError as exc:
                raise ChangeRefused(400, f"{file}: not valid YAML: {str(exc)[:300]}") from None
            if doc is None:
                doc = CommentedMap()
            if not isinstance(doc, dict):
                raise ChangeRefused(400, f"{file}: the file is not a mapping")
            self._docs[file] = doc
        return self._docs[file]

    def apply(self, change: Change) -> None:
        target, body = change.target, change.body
        if target.kind == "zone":
            self._zone(change)
            return
        if target.kind == "record" and self._read is not None and self._splice(change):
            return
        place = self._find(target)
        if body is None:
            if place is None and change.missing_ok:
                return
            if place is None:
                raise ChangeRefused(404, f"{target.route}: no such entry")
            del place.container[place.key]
            self._tidy(place.file, target)
            self.changed.add(place.file)
            return
        body = plain(body)  # JSON types only: str subclasses and the like cannot be written
        if target.kind == "backend":
            body = {"name": target.name, **body}
            if str(body["name"]) != target.name:
                raise ChangeRefused(
                    400, f"the body names backend {body['name']!r}, the route {target.name!r}"
                )
        node = _node(body, top=target.kind in SECTIONS)
        if place is not None:
            place.container[place.key] = node
            self.changed.add(place.file)
            return
        file, container, key = self._new_place(target)
        if isinstance(container, list):
            container.append(node)
        else:
            container[key] = node
        self.changed.add(file)

    def _zone(self, change: Change) -> None:
        """A zone's settings replaced (its records and global sections kept), or a new
        zone: a file `ZONE.yaml` of its own (its records follow in the same change set)."""
        zone = change.target.name
        file = zone_file(self.docs(), zone)
        if change.body is None:
            if file is None and change.missing_ok:
                return
            if file is None:
                raise ChangeRefused(404, f"zones/{zone}: no such zone")
            raise ChangeRefused(
                400,
                f"zones/{zone}: a zone is not deleted through the config "
                f"API: remove its YAML file ({file})",
            )
        body = plain(change.body)
        if not isinstance(body, dict):
            raise ChangeRefused(400, f"zones/{zone}: the body is an object of zone settings")
        wrong = [str(k) for k in body if str(k) in NOT_ZONE_SETTINGS]
        if wrong:
            raise ChangeRefused(
                400,
                f"zones/{zone}: {', '.join(wrong)}: not zone settings "
                "(records go to zones/Z/records/NAME, global sections to "
                "their own routes)",
            )
        if file is None:
            file = self._new_zone_file(zone)
        doc = self._doc(file)
        for key in [k for k in doc if str(k) not in NOT_ZONE_SETTINGS and k not in body]:
            del doc[key]
        at = list(doc).index("zone") + 1 if "zone" in doc else 0
        for key, value in body.items():  # new settings go after `zone:`, before the records
            if key in doc:
                doc[key] = _node(value)
            else:
                doc.insert(at, key, _node(value))
            at = list(doc).index(key) + 1
        self.changed.add(file)

    def _new_zone_file(self, zone: str) -> str:
        if zone == "." or not NEW_ZONE_NAME.fullmatch(zone):
            raise ChangeRefused(
                400,
                f"zones/{zone[:80]}: the config API creates zones whose "
                "labels are letters, digits, '-' and '_' (write the YAML file "
                "of any other zone by hand)",
            )
        file = f"{zone}.yaml"
        if file in self.texts:
            raise ChangeRefused(
                409, f"zones/{zone}: {file} exists and defines no zone {zone}: nothing changed"
            )
        if len(self.texts) >= MAX_FILES:
            raise ChangeRefused(
                400,
                f"zones/{zone}: the directory holds {MAX_FILES} YAML "
                "files, the most dnsd reads: nothing changed",
            )
        self.texts[file] = ""
        self._docs[file] = CommentedMap([("zone", zone)])
        return file

    def _new_place(self, target: Target) -> tuple[str, Any, Any]:
        docs = self.docs()
        if target.kind in SECTIONS:
            section = SECTIONS[target.kind]
            file = next(
                (
                    f
                    for f, d in docs.items()
                    if isinstance(d, dict) and isinstance(d.get(section), dict)
                ),
                NEW_FILE,
            )
            doc = self._doc(file)
            if not isinstance(doc.get(section), dict):
                doc[section] = CommentedMap()
            return file, doc[section], target.name
        if target.kind == "backend":
            pool = self._find(Target("pool", target.names[:1]))
            if pool is None:
                raise ChangeRefused(404, f"pools/{target.names[0]}: no such pool")
            entry = pool.container[pool.key]
            if not isinstance(entry, dict):
                raise ChangeRefused(400, f"pools/{target.names[0]}: the pool is not a mapping")
            if not isinstance(entry.get("backends"), list):
                entry["backends"] = CommentedSeq()
            return pool.file, entry["backends"], None
        zone = target.names[0]
        found = zone_file(docs, zone)
        if found is None:
            raise ChangeRefused(
                404, f"zones/{zone}: no YAML file of the directory defines this zone"
            )
        doc = self._doc(found)
        if not isinstance(doc.get("records"), dict):
            doc["records"] = CommentedMap()
        return found, doc["records"], relative(target.name, zone + ".")

    def _tidy(self, file: str, target: Target) -> None:
        """A section left empty by a delete goes too (`pools: {}` says nothing)."""
        if target.kind in SECTIONS:
            doc = self._doc(file)
            if doc.get(SECTIONS[target.kind]) == {}:
                del doc[SECTIONS[target.kind]]

    def result(self) -> dict[str, str]:
        """The new text of every file a change touched."""
        out = {}
        for file in sorted(self.changed):
            if file not in self._docs:  # changed as text
                out[file] = self.texts[file]
                continue
            stream = io.StringIO()
            _yaml().dump(self._docs[file], stream)
            out[file] = stream.getvalue()
        return out

    def _splice(self, change: Change) -> bool:
        """A record of a big file that is one line (`h1: {A: 10.0.0.1}`, the usual shape of
        big zones), replaced, added or deleted in the file's text: the round-trip library
        would take minutes to load and write a 40,000-record file again, libyaml finds the
        line in about a second. Every other byte stays; the new text must read, through the
        loader, as the old one but for this entry, else (and for any other shape) False:
        the change is made the usual way."""
        target, zone = change.target, change.target.names[0]
        file = zone_file(self.docs(), zone)
        if file is None or file in self._docs or file in self.read_back:
            return False  # a second change to a file: the round trip, from the new text
        text = self.texts[file]
        if len(text) < SPLICE_MIN or not text.isascii() or "\r" in text:
            return False  # libyaml's positions are in bytes: ASCII only, one kind of newline
        new = _spliced(text, target, change.body)
        if new is None:
            return False
        try:
            new_doc = load_yaml(new)
        except YamlSyntaxError:
            return False
        origin = zone + "."
        others = _others(new_doc, origin, target.name)
        if others is None or others != _others(self.docs()[file], origin, target.name):
            return False
        self.texts[file] = new
        self.read_back[file] = (hashlib.sha256(new.encode()).digest(), new_doc)
        self.changed.add(file)
        return True


def _spliced(text: str, target: Target, body: Any) -> str | None:
    """`text` with the record's line replaced, added or deleted, or None when the records
    or that record are not in the shape this handles (block mapping, one line each)."""
    root = compose_marked(text)
    if not isinstance(root, pyyaml.MappingNode):
        return None
    records = next(
        (v for k, v in root.value if k.tag.endswith(":str") and k.value == "records"), None
    )
    if not isinstance(records, pyyaml.MappingNode) or records.flow_style or not records.value:
        return None
    origin = target.names[0] + "."
    wanted = absolute(target.name, origin)
    found = [
        (k, v)
        for k, v in records.value
        if isinstance(k, pyyaml.ScalarNode) and absolute(str(k.value), origin) == wanted
    ]
    if len(found) > 1:
        return None
    key, value = found[0] if found else records.value[-1]
    if key.start_mark.line != value.end_mark.line:
        return None  # not one line
    start = text.rfind("\n", 0, key.start_mark.index) + 1
    end = text.find("\n", value.end_mark.index)
    end = len(text) if end < 0 else end
    rest = text[value.end_mark.index : end].strip()
    if text[start : key.start_mark.index].strip() or (rest and not rest.startswith("#")):
        return None  # something else shares the line
    if body is None:
        if not found or len(records.value) == 1:
            return None
        return text[:start] + text[end + 1 :]
    node = _node(plain(body))
    if found:
        line = _one_line("x", node)
        if line is None:
            return None
        return text[: value.start_mark.index] + line[3:] + text[value.end_mark.index :]
    line = _one_line(relative(target.name, origin), node)
    if line is None:
        return None
    indent = " " * key.start_mark.column
    head = text[:end] + "\n" if end < len(text) else text + "\n"
    return head + indent + line + "\n" + text[end + 1 :]


def _one_line(key: str, node: Any) -> str | None:
    stream = io.StringIO()
    _yaml().dump(CommentedMap([(key, node)]), stream)
    out = stream.getvalue()
    return out[:-1] if out.count("\n") == 1 and out.endswith("\n") else None


def _others(doc: Any, origin: str, name: str) -> Any:
    """A zone file's data as JSON without one record name (and the records' order kept)."""
    data = plain(doc)
    if not isinstance(data, dict) or not isinstance(data.get("records"), dict):
        return None
    wanted = absolute(name, origin)
    records = [(k, v) for k, v in data["records"].items() if absolute(str(k), origin) != wanted]
    return {**data, "records": records}


def relative(name: str, origin: str) -> str:
    """A record name as the YAML writes it: `@` for the apex, else relative to the zone."""
    full = absolute(name, origin)
    if full == origin:
        return "@"
    return full[: -len(origin) - 1] if full.endswith("." + origin) else full


def _node(value: Any, top: bool = False) -> Any:
    """JSON data as round-trip YAML nodes: short mappings and lists of scalars in flow
    style (`{name: a, address: 192.0.2.1}`, `[a, b]`), like the bundled samples."""
    if isinstance(value, dict):
        node = CommentedMap((k, _node(v)) for k, v in value.items())
        if not top and _short(value):
            node.fa.set_flow_style()
        return node
    if isinstance(value, list):
        seq = CommentedSeq(_node(v) for v in value)
        if all(not isinstance(v, dict | list) for v in value):
            seq.fa.set_flow_style()
        return seq
    return value


def _short(value: dict[str, Any]) -> bool:
    flat = all(
        not isinstance(v, dict | list) or (isinstance(v, list) and _scalars(v))
        for v in value.values()
    )
    return flat and len(json.dumps(value)) <= FLOW_WIDTH


def _scalars(items: list[Any]) -> bool:
    return all(not isinstance(v, dict | list) for v in items)
