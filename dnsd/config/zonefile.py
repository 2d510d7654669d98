"""RFC 1035 master files for `file:` zones (docs/configuration.md): the common line shapes
read by dnsd.config.zonefile_lines, every other line by dnspython, with the same result.

`$INCLUDE` is expanded here rather than by dnspython, which would open the path relative
to the working directory: an included file must be a regular file inside the config
directory (the same rule as the YAML files), and at most `MAX_INCLUDE_DEPTH` deep. The
origin and default TTL are put back after an included file, as RFC 1035 §5.1 asks. Every
record keeps the file and line it came from, so `dnsd check` can point at it.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dns.exception
import dns.grange
import dns.name
import dns.node
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.tokenizer
import dns.zonefile

from dnsd.config.files import UnsafeFile, read_config_file
from dnsd.config.zonefile_lines import LineError, read_lines
from dnsd.reaper import free_in_steps

# Bounds of one zone file with everything it includes (docs/configuration.md, "Zone
# files"): past one, the load stops with an error naming the file and line.
MAX_INCLUDE_DEPTH = 8
MAX_INCLUDED_FILES = 1_000  # $INCLUDE lines followed, counted over the whole tree
MAX_TEXT_BYTES = 256 << 20  # the zone file and its includes together
MAX_GENERATE = 65_536  # records made by one $GENERATE
MAX_RECORDS = 1_000_000  # one zone file, includes and $GENERATE counted
_DIRECTIVE = re.compile(
    r"^\$(ORIGIN|TTL|INCLUDE|GENERATE)[ \t]+(\S+)(?:[ \t]+(\S+))?", re.IGNORECASE
)
# Set by a load that may be abandoned (a stopping server): looked at every _POLL_EVERY
# records. A context variable, so concurrent loads (a config API check beside a reload)
# each have their own; asyncio.to_thread carries it into the worker thread.
cancel_check: ContextVar[Callable[[], bool]] = ContextVar("cancel_check", default=lambda: False)
_WHERE = re.compile(r":(\d+): ")


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One record of a zone file: absolute lower-case owner, presentation-form RDATA with
    absolute names, and where it was written."""

    owner: str
    rtype: str
    ttl: int
    file: str
    line: int
    wire: bytes  # the RDATA as dnspython read it: what dnsd serves (dnsd.rdata)

    @property
    def text(self) -> str:
        """The presentation form, made when asked (an error message, the SOA, an import):
        a load of 1,000,000 records asks for none of the others."""
        rdtype = dns.rdatatype.from_text(self.rtype)
        rdata = dns.rdata.from_wire(dns.rdataclass.IN, rdtype, self.wire, 0, len(self.wire))
        return str(rdata.to_text(origin=None, relativize=False))


class ZoneFileError(Exception):
    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(message)
        self.file, self.line, self.message = file, line, message


@dataclass(slots=True)
class _Budget:
    """What the includes of one zone file have used so far."""

    files: int = 0
    text_bytes: int = 0
    generated: int = 0


@dataclass(slots=True)
class _Line:
    text: str
    file: str
    line: int


def read_zone_file(
    path: Path, origin: str, directory: Path, default_ttl: int, *, dnspython_only: bool = False
) -> list[FileRecord]:
    """Every record of the file at `path` (and its includes); raises ZoneFileError.
    `dnspython_only`: every line read by dnspython (what the fast reader is tested against)."""
    lines: list[_Line] = []
    _expand(path, directory, origin, None, lines, _Budget(), depth=0)

    def where(combined_line: int) -> tuple[str, int]:
        if 1 <= combined_line <= len(lines):
            item = lines[combined_line - 1]
            return item.file, item.line
        return str(path), 0

    try:
        if dnspython_only:
            return _parse(_joined(lines), origin, default_ttl, where)
        return _read_fast(lines, origin, default_ttl, where)
    finally:
        free_in_steps(lines)


def _joined(lines: list[_Line]) -> str:
    # Written line by line, not joined in one call: one C call over a big file holds the
    # GIL (and so the server's other threads) for tens of ms.
    buffer = io.StringIO()
    for item in lines:
        buffer.write(item.text)
        buffer.write("\n")
    return buffer.getvalue()


def _read_fast(
    lines: list[_Line], origin: str, default_ttl: int, where: Callable[[int], tuple[str, int]]
) -> list[FileRecord]:
    cancelled = cancel_check.get()

    def stop() -> None:
        if cancelled():
            raise LoadCancelled

    texts = [item.text for item in lines]
    try:
        found = read_lines(texts, origin, default_ttl, max_records=MAX_RECORDS, cancelled=stop)
    except LineError as exc:
        raise ZoneFileError(*where(exc.line), exc.message) from None
    finally:
        free_in_steps(texts)
    names: dict[int, str] = {}
    out = []
    for owner, rdtype, ttl, line, wire in found:
        rtype = names.get(rdtype)
        if rtype is None:
            rtype = names[rdtype] = dns.rdatatype.to_text(dns.rdatatype.RdataType(rdtype))
        file, number = where(line)
        out.append(FileRecord(owner, rtype, ttl, file, number, wire))
    free_in_steps(found)
    out.sort(key=lambda r: (r.file, r.line))
    return out


def _expand(
    path: Path,
    directory: Path,
    origin: str,
    ttl: str | None,
    out: list[_Line],
    budget: _Budget,
    depth: int,
) -> None:
    """Append the lines of `path` to `out`, includes spliced in with their own places."""
    try:
        text = read_config_file(directory, path)
    except UnsafeFile as exc:
        raise ZoneFileError(str(path), 0, str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise ZoneFileError(str(path), 0, f"cannot read: {reason}") from None
    budget.text_bytes += len(text)
    if budget.text_bytes > MAX_TEXT_BYTES:
        raise ZoneFileError(
            str(path),
            0,
            f"the zone file and its includes hold more than {MAX_TEXT_BYTES >> 20} MiB of text",
        )
    # Lines end at LF, CRLF or CR (RFC 1035 §5.1 and the old Mac convention); read one by
    # one, as above, rather than split in one call.
    for number, line in enumerate(io.StringIO(text, newline=None), start=1):
        raw = line[:-1] if line.endswith("\n") else line
        match = _DIRECTIVE.match(raw)
        if match is None:
            out.append(_Line(raw, str(path), number))
            continue
        kind, value, extra = match.group(1).upper(), match.group(2), match.group(3)
        if kind == "ORIGIN":
            origin = _absolute(value, origin)
            out.append(_Line(f"$ORIGIN {origin}", str(path), number))
        elif kind == "TTL":
            ttl = value
            out.append(_Line(raw, str(path), number))
        elif kind == "GENERATE":
            _check_generate(value, str(path), number, budget)
            out.append(_Line(raw, str(path), number))
        else:
            if depth >= MAX_INCLUDE_DEPTH:
                raise ZoneFileError(
                    str(path), number, f"$INCLUDE nested more than {MAX_INCLUDE_DEPTH} deep"
                )
            budget.files += 1
            if budget.files > MAX_INCLUDED_FILES:
                raise ZoneFileError(
                    str(path),
                    number,
                    f"more than {MAX_INCLUDED_FILES} "
                    "$INCLUDE lines in one zone file and its includes",
                )
            target = directory / value if not Path(value).is_absolute() else Path(value)
            inner_origin = (
                _absolute(extra, origin) if extra and not extra.startswith(";") else origin
            )
            out.append(_Line(f"$ORIGIN {inner_origin}", str(path), number))
            _expand(target, directory, inner_origin, ttl, out, budget, depth + 1)
            out.append(_Line(f"$ORIGIN {origin}", str(path), number))
            if ttl is not None:
                out.append(_Line(f"$TTL {ttl}", str(path), number))


def _check_generate(text: str, file: str, line: int, budget: _Budget) -> None:
    """A $GENERATE's range, checked before dnspython expands it (each record of the range
    would be made, one by one). A range it cannot read is left to its own error."""
    try:
        start, stop, step = dns.grange.from_text(text)
    except Exception:
        return
    count = len(range(start, stop + 1, step))
    if count > MAX_GENERATE:
        raise ZoneFileError(
            file,
            line,
            f"$GENERATE {text} makes {count} records: at most {MAX_GENERATE} per $GENERATE",
        )
    budget.generated += count
    if budget.generated > MAX_RECORDS:
        raise ZoneFileError(
            file, line, f"the $GENERATE lines make more than {MAX_RECORDS} records in all"
        )


def _absolute(name: str, origin: str) -> str:
    if name == "@":
        return origin
    return name if name.endswith(".") else f"{name}.{origin}"


def _parse(
    text: str, origin: str, default_ttl: int, where: Callable[[int], tuple[str, int]]
) -> list[FileRecord]:
    manager = _Manager(dns.name.from_text(origin))
    txn = manager.writer(True)
    tok = dns.tokenizer.Tokenizer(text, "<zone>")
    reader = dns.zonefile.Reader(
        tok, dns.rdataclass.IN, txn, allow_include=False, default_ttl=default_ttl
    )

    def line_now() -> tuple[str, int]:
        # The tokenizer counts a line once it has read its newline: a record (or an error
        # found at its end) belongs to the line before.
        line = tok.where()[1]
        position = tok.file.tell()
        return where(line - 1 if position > 0 and text[position - 1] == "\n" else line)

    txn.line_of = line_now
    txn.cancelled = cancel_check.get()
    try:
        reader.read()
    except LoadCancelled:
        raise
    except dns.exception.SyntaxError as exc:
        message = _WHERE.split(str(exc), maxsplit=1)[-1]
        raise ZoneFileError(*line_now(), message) from None
    except _TooMany:
        raise ZoneFileError(*line_now(), f"more than {MAX_RECORDS} records") from None
    except Exception as exc:  # dnspython raises more than DNSException on hostile text
        raise ZoneFileError(*line_now(), str(exc) or type(exc).__name__) from None
    try:
        return txn.records()
    finally:
        free_in_steps(txn.rdatasets, txn.keys_of, txn.lines.by_id)


class _TooMany(Exception):
    pass


class _Lines:
    """Where each record was written, by the identity of its rdata object (which the
    transaction keeps alive): looked up as `get((name, rdtype, rdata), default)`."""

    def __init__(self) -> None:
        self.by_id: dict[int, tuple[str, int]] = {}

    def add(self, rdata: Any, where: tuple[str, int]) -> None:
        self.by_id.setdefault(id(rdata), where)

    def get(self, key: tuple[Any, int, Any], default: tuple[str, int]) -> tuple[str, int]:
        return self.by_id.get(id(key[2]), default)

    def __len__(self) -> int:
        return len(self.by_id)


class LoadCancelled(Exception):
    """The process is stopping: the load was abandoned part way (nothing was published)."""


_POLL_EVERY = 1024  # records read between two looks at the cancel flag


class _Collect(dns.zonefile.RRsetsReaderTransaction):
    """Keeps every rdataset as read plus the line each record was first written on.

    dnspython's rrsets transaction finds a name's rdatasets by scanning all of them, once
    per record read (the CNAME-and-other-data check): quadratic, 38 s for 8,000 records.
    Here a name → keys index makes each of those lookups a dict access."""

    def __init__(self, manager: Any) -> None:
        super().__init__(manager, True, False)
        self.lines = _Lines()
        self.line_of: Callable[[], tuple[str, int]] = lambda: ("", 0)
        self.keys_of: dict[Any, list[tuple[Any, int, Any]]] = {}
        self.cancelled: Callable[[], bool] = lambda: False
        self._until_poll = _POLL_EVERY

    def _get_node(self, name: Any) -> Any:
        keys = self.keys_of.get(name)
        if not keys:
            return None
        node = dns.node.Node()
        node.rdatasets = [self.rdatasets[key] for key in keys]
        return node

    def _name_exists(self, name: Any) -> bool:
        return bool(self.keys_of.get(name))

    def _delete_name(self, name: Any) -> None:
        for key in self.keys_of.pop(name, ()):
            self.rdatasets.pop(key, None)

    def _delete_rdataset(self, name: Any, rdtype: Any, covers: Any) -> None:
        key = (name, rdtype, covers)
        if self.rdatasets.pop(key, None) is not None:
            self.keys_of[name].remove(key)

    def _put_rdataset(self, name: Any, rdataset: Any) -> None:
        key = (name, rdataset.rdtype, rdataset.covers)
        before = self.rdatasets.get(key)
        if before is None:
            self.keys_of.setdefault(name, []).append(key)
        super()._put_rdataset(name, rdataset)
        self._until_poll -= 1
        if self._until_poll <= 0:  # a stopping server does not wait for the whole file
            self._until_poll = _POLL_EVERY
            if self.cancelled():
                raise LoadCancelled
        # The set keeps its records in order and appends: the new ones are those past the
        # old length (no hashing of RDATA, no pass over a big RRset per record). A type
        # that holds one record (CNAME, SOA) is replaced instead: all of it is new.
        added = len(rdataset) - (0 if before is None else len(before))
        if (
            before is not None
            and before
            and next(iter(rdataset.items)) is not next(iter(before.items))
        ):
            for gone in before.items:
                self.lines.by_id.pop(id(gone), None)  # its id may be reused by a new object
            added = len(rdataset)
        if added > 0:
            if len(self.lines) + added > MAX_RECORDS:
                raise _TooMany
            where = self.line_of()
            for rdata in itertools.islice(reversed(rdataset.items), added):
                self.lines.add(rdata, where)

    def _end_transaction(self, commit: bool) -> None:
        pass  # the records are taken from `rdatasets` directly

    def records(self) -> list[FileRecord]:
        out = []
        ttls: dict[int, int] = {}  # one int object per TTL (above 256 each is its own)
        for (name, rdtype, _covers), rdataset in self.rdatasets.items():
            owner = name.to_text().lower()
            ttl = ttls.setdefault(rdataset.ttl, rdataset.ttl)
            for rdata in rdataset:
                file, line = self.lines.get((name, rdtype, rdata), ("", 0))
                out.append(
                    FileRecord(
                        owner,
                        dns.rdatatype.to_text(rdtype),
                        ttl,
                        file,
                        line,
                        rdata.to_wire(),
                    )
                )
        out.sort(key=lambda r: (r.file, r.line))
        return out


class _Manager(dns.zonefile.RRSetsReaderManager):
    def __init__(self, origin: dns.name.Name) -> None:
        super().__init__(origin, False, dns.rdataclass.IN)

    def writer(self, replacement: bool = False) -> _Collect:
        return _Collect(self)
