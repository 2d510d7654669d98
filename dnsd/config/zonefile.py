"""RFC 1035 master files for `file:` zones (config.md, Additions), parsed by dnspython.

`$INCLUDE` is expanded here rather than by dnspython, which would open the path relative
to the working directory: an included file must be a regular file inside the config
directory (the same rule as the YAML files), and at most `MAX_INCLUDE_DEPTH` deep. The
origin and default TTL are put back after an included file, as RFC 1035 §5.1 asks. Every
record keeps the file and line it came from, so `dnsd check` can point at it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dns.exception
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.tokenizer
import dns.zonefile

from dnsd.config.files import UnsafeFile, read_config_file

MAX_INCLUDE_DEPTH = 8
MAX_RECORDS = 1_000_000  # one zone file, includes and $GENERATE counted
_DIRECTIVE = re.compile(r"^\$(ORIGIN|TTL|INCLUDE)[ \t]+(\S+)(?:[ \t]+(\S+))?", re.IGNORECASE)
_WHERE = re.compile(r":(\d+): ")


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One record of a zone file: absolute lower-case owner, presentation-form RDATA with
    absolute names, and where it was written."""

    owner: str
    rtype: str
    ttl: int
    text: str
    file: str
    line: int
    wire: bytes = b""  # the RDATA as dnspython read it: what dnsd serves (dnsd.rdata)


class ZoneFileError(Exception):
    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(message)
        self.file, self.line, self.message = file, line, message


@dataclass(slots=True)
class _Line:
    text: str
    file: str
    line: int


def read_zone_file(path: Path, origin: str, directory: Path, default_ttl: int) -> list[FileRecord]:
    """Every record of the file at `path` (and its includes); raises ZoneFileError."""
    lines: list[_Line] = []
    _expand(path, directory, origin, None, lines, depth=0)
    text = "\n".join(item.text for item in lines) + "\n"

    def where(combined_line: int) -> tuple[str, int]:
        if 1 <= combined_line <= len(lines):
            item = lines[combined_line - 1]
            return item.file, item.line
        return str(path), 0

    return _parse(text, origin, default_ttl, where)


def _expand(
    path: Path,
    directory: Path,
    origin: str,
    ttl: str | None,
    out: list[_Line],
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
    for number, raw in enumerate(text.splitlines(), start=1):
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
        else:
            if depth >= MAX_INCLUDE_DEPTH:
                raise ZoneFileError(str(path), number, "$INCLUDE nested too deeply")
            target = directory / value if not Path(value).is_absolute() else Path(value)
            inner_origin = (
                _absolute(extra, origin) if extra and not extra.startswith(";") else origin
            )
            out.append(_Line(f"$ORIGIN {inner_origin}", str(path), number))
            _expand(target, directory, inner_origin, ttl, out, depth + 1)
            out.append(_Line(f"$ORIGIN {origin}", str(path), number))
            if ttl is not None:
                out.append(_Line(f"$TTL {ttl}", str(path), number))


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
    try:
        reader.read()
    except dns.exception.SyntaxError as exc:
        message = _WHERE.split(str(exc), maxsplit=1)[-1]
        raise ZoneFileError(*line_now(), message) from None
    except _TooMany:
        raise ZoneFileError(*line_now(), f"more than {MAX_RECORDS} records") from None
    except Exception as exc:  # dnspython raises more than DNSException on hostile text
        raise ZoneFileError(*line_now(), str(exc) or type(exc).__name__) from None
    return txn.records()


class _TooMany(Exception):
    pass


class _Collect(dns.zonefile.RRsetsReaderTransaction):
    """Keeps every rdataset as read plus the line each record was first written on."""

    def __init__(self, manager: Any) -> None:
        super().__init__(manager, True, False)
        self.lines: dict[tuple[Any, int, Any], tuple[str, int]] = {}
        self.line_of: Callable[[], tuple[str, int]] = lambda: ("", 0)

    def _put_rdataset(self, name: Any, rdataset: Any) -> None:
        super()._put_rdataset(name, rdataset)
        for rdata in rdataset:
            if (name, rdataset.rdtype, rdata) not in self.lines:
                if len(self.lines) >= MAX_RECORDS:
                    raise _TooMany
                self.lines[(name, rdataset.rdtype, rdata)] = self.line_of()

    def _end_transaction(self, commit: bool) -> None:
        pass  # the records are taken from `rdatasets` directly

    def records(self) -> list[FileRecord]:
        out = []
        for (name, rdtype, _covers), rdataset in self.rdatasets.items():
            owner = name.to_text().lower()
            for rdata in rdataset:
                file, line = self.lines.get((name, rdtype, rdata), ("", 0))
                out.append(
                    FileRecord(
                        owner, dns.rdatatype.to_text(rdtype), rdataset.ttl,
                        rdata.to_text(origin=None, relativize=False), file, line,
                        rdata.to_wire(),
                    )
                )  # fmt: skip
        out.sort(key=lambda r: (r.file, r.line))
        return out


class _Manager(dns.zonefile.RRSetsReaderManager):
    def __init__(self, origin: dns.name.Name) -> None:
        super().__init__(origin, False, dns.rdataclass.IN)

    def writer(self, replacement: bool = False) -> _Collect:
        return _Collect(self)
