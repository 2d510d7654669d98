"""Read entries of a configuration directory, and change it safely.

A change set is checked as a whole before anything is written: ETags first (412), then the
new texts are read back by dnsd's own loader (what was asked is what will be read), then
the whole resulting directory is validated by the same loader `dnsd check` runs (400 with
every reason). Only then is each touched file replaced atomically (temp file, fsync,
rename, fsync of the directory), all of them as one change (dnsd.atomic_files: a journal
makes a crash at any point leave the old files or the new ones). No server is needed: the octoDNS provider's
`directory:` mode uses this module as it is; a running server adds a reload (writer.py).

What a check costs grows with what changes, not with the directory: a running server
passes what it already knows of the files a change does not touch (their parsed data,
keyed by the SHA-256 of their text, and the loader's results for them), so a write beside
a 40,000-record zone does not read that zone with the round-trip YAML library, parse it
or validate it again; only the files a change edits are loaded for editing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnsd.atomic_files import WriteFailed, recover, write_files
from dnsd.config.files import UnsafeFile, read_config_file
from dnsd.config.loader import ParseCache, load_config
from dnsd.config.yamlio import YamlSyntaxError, load_yaml
from dnsd.errors import ConfigError
from dnsd.provision.edit import MAX_FILES, ChangeRefused, Editor, lookup, plain
from dnsd.provision.targets import SECTIONS, Change, Target, etag, matches

# file name → (the SHA-256 of a text of it, that text as JSON data): what a caller already
# parsed (dnsd.provision.reader); used only while the digest matches the file read now.
Known = Mapping[str, tuple[bytes, Any]]
# Words that make a file one a change to a pool, backend, monitor or load balancer may be
# about (a file without any of them holds none of those sections).
_SECTION_WORDS = re.compile(r"\b(?:pools|monitors|load_balancers)\b")


@dataclass(frozen=True, slots=True)
class Prepared:
    """A checked change set: the texts to write, and what each entry was and becomes."""

    old_texts: dict[str, str | None]  # file → its text now (None: the file is new)
    new_texts: dict[str, str]
    before: dict[str, Any]  # route → entry (None: absent)
    after: dict[str, Any]
    etags: dict[str, str | None]  # route → the new ETag (None: deleted)
    created: tuple[str, ...]  # routes that did not exist


def read_texts(directory: Path) -> dict[str, str]:
    try:
        recover(directory)  # an interrupted write is finished (or undone) before reading
    except (WriteFailed, OSError) as exc:
        raise ChangeRefused(500, f"{directory}: {exc}") from None
    texts = {}
    for path in sorted(directory.glob("*.yaml"))[:MAX_FILES]:
        try:
            texts[path.name] = read_config_file(directory, path)
        except (OSError, UnsafeFile, UnicodeDecodeError) as exc:
            raise ChangeRefused(400, f"{path}: cannot read: {exc}") from None
    return texts


def parsed(texts: Mapping[str, str], known: Known | None = None) -> dict[str, Any]:
    """Every file as dnsd's loader reads it (from `known` when its text is the one parsed
    there); a file that does not parse is refused."""
    docs = {}
    for file, text in texts.items():
        seen = known.get(file) if known else None
        if seen is not None and seen[0] == hashlib.sha256(text.encode()).digest():
            docs[file] = seen[1]
            continue
        try:
            docs[file] = load_yaml(text)
        except YamlSyntaxError as exc:
            raise ChangeRefused(400, f"{file}:{exc.line}: {exc.message}") from None
    return docs


def entry(docs: Mapping[str, Any], target: Target) -> Any:
    """The entry as JSON data, or None."""
    value = lookup(docs, target)
    return None if value is None else plain(value)


def read_entry(directory: Path, target: Target) -> Any:
    return entry(parsed(read_texts(directory)), target)


def read_all(directory: Path) -> dict[str, Any]:
    """Every entry the config API can change, as one JSON document (for octoDNS):
    {"zones": {ZONE: {"file": F, "ttl": T, "records": {...}}}, "pools": ..., "monitors": ...,
    "load_balancers": ...}."""
    out: dict[str, Any] = {"zones": {}, **{s: {} for s in SECTIONS.values()}}
    for file, doc in parsed(read_texts(directory)).items():
        if not isinstance(doc, dict):
            continue
        if "zone" in doc:
            zone = str(doc["zone"]).lower().rstrip(".")
            records = doc.get("records") if isinstance(doc.get("records"), dict) else {}
            ttl = doc.get("ttl", 3600)
            out["zones"][zone] = {"file": file, "ttl": ttl, "records": plain(records)}
        for section in SECTIONS.values():
            if isinstance(doc.get(section), dict):
                out[section].update(plain(doc[section]))
    return out


def prepare(
    directory: Path,
    changes: Sequence[Change],
    cancelled: Callable[[], bool] | None = None,
    known: Known | None = None,
    cache: ParseCache | None = None,
) -> Prepared:
    """Check a change set against the directory as it is now; ChangeRefused if any part
    fails (404 missing, 412 stale ETag, 400 invalid), in which case nothing is written.
    `cancelled`: the check of the whole directory gives up (LoadCancelled) once it is
    True (a stopping server). `known`: files already parsed; `cache`: the loader's
    results of files that did not change (filled in with those of the new texts) — both
    used only for texts identical to what is read now, so the check is the same."""
    texts = read_texts(directory)
    docs = parsed(texts, _with_stand_ins(texts, known, cache, changes))
    before = {c.target.route: entry(docs, c.target) for c in changes}
    for change in changes:
        current = etag(before[change.target.route])
        if change.if_match is not None and not matches(change.if_match, current):
            raise ChangeRefused(
                412,
                f"{change.target.route}: If-Match {change.if_match[:80]} "
                f"is stale (the entry's ETag is {current or 'none: it does not exist'})",
            )
    editor = Editor(texts, docs)
    for change in changes:
        editor.apply(change)
    new_texts = editor.result()
    new_docs = {**docs, **parsed(new_texts, editor.read_back)}
    last = {c.target.route: c for c in changes}  # the last change to an entry decides it
    after = {route: entry(new_docs, c.target) for route, c in last.items()}
    for route, change in last.items():
        if after[route] != (None if change.body is None else _expected(change)):
            raise ChangeRefused(
                400,
                f"{route}: the entry would not read back as sent "
                "(a value YAML reads as another type?)",
            )
    _keep_apex(before, after)
    try:
        load_config(directory, overlay=new_texts, cache=cache, cancelled=cancelled)
    except ConfigError as exc:
        errors = [str(r) for r in exc.reasons if not r.warning]
        raise ChangeRefused(
            400, "the change makes the configuration invalid: nothing changed", errors
        ) from None
    return Prepared(
        old_texts={f: texts.get(f) for f in new_texts},
        new_texts=new_texts,
        before=before,
        after=after,
        etags={route: etag(value) for route, value in after.items()},
        created=tuple(r for r, v in before.items() if v is None and after[r] is not None),
    )


def _with_stand_ins(
    texts: Mapping[str, str],
    known: Known | None,
    cache: ParseCache | None,
    changes: Sequence[Change],
) -> Known | None:
    """`known`, and an empty stand-in for each file no change can be about, told by the
    loader's result for its very text: valid, a zone other than the changed ones (or
    none), no section words. Looking entries up, it reads as the file does (nothing), so
    a big unrelated zone is neither parsed nor kept parsed for a write; the check of the
    whole directory still reads it (from the cache)."""
    if cache is None:
        return known
    out = dict(known or {})
    zones = {c.target.names[0] for c in changes if c.target.kind in ("record", "zone")}
    for file, text in texts.items():
        result = cache.files.get(file)
        if result is None or any(not r.warning for r in result.reasons):
            continue
        if result.zone is not None and result.zone.name.lower().rstrip(".") in zones:
            continue
        digest = hashlib.sha256(text.encode()).digest()
        if file in out and out[file][0] == digest:
            continue  # known as it is
        if result.digest == digest and not _SECTION_WORDS.search(text):
            out[file] = (digest, {})
    return out


def _keep_apex(before: dict[str, Any], after: dict[str, Any]) -> None:
    """A zone's apex keeps its NS and SOA records: a change that would remove the last
    of them is refused — the zone would stop being delegable."""
    for route, old in before.items():
        if not route.startswith("zones/") or not route.endswith("/records/@"):
            continue
        new: dict[str, Any] = after[route] if isinstance(after.get(route), dict) else {}
        for rtype in ("NS", "SOA"):
            had = isinstance(old, dict) and any(str(k).upper() == rtype for k in old)
            if had and not any(str(k).upper() == rtype for k in new):
                raise ChangeRefused(
                    400,
                    f"{route}: the change removes the zone's {rtype} "
                    "records: a zone keeps them at its apex",
                )


def _expected(change: Change) -> Any:
    body = plain(change.body)
    if change.target.kind == "backend" and isinstance(body, dict):
        body = {"name": change.target.name, **body}
    return body


def write_texts(directory: Path, texts: Mapping[str, str | None]) -> None:
    """Replace (None: remove) the files as one change: after a crash at any point, and
    after a failure, either every file is new or every file is as it was. ChangeRefused
    (500, naming the file and the reason) when nothing was written."""
    try:
        write_files(directory, texts)
    except WriteFailed as exc:
        raise ChangeRefused(500, f"the change could not be written: {exc}") from None


def apply_to_directory(directory: Path, changes: Sequence[Change]) -> Prepared:
    """Check and write a change set (no server involved)."""
    prepared = prepare(directory, changes)
    write_texts(directory, prepared.new_texts)
    return prepared
