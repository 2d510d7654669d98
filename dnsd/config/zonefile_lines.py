"""A zone file's records, read line by line: the common shapes by a reader of dnsd's own,
every other line by dnspython, with what dnspython alone would give (docs/configuration.md,
"Zone files").

Measured speed demands it (bench/README.md): dnspython builds a tokenizer token, a `Name`,
an `Rdata` and a transaction step per line, 60% of loading a big zone. Here a line of the
shape `owner [ttl] [IN] type rdata [; comment]` (or its TTL and class swapped, or a blank
owner) with a type in `_TYPES`, plain ASCII names and nothing the tokenizer treats
specially (parentheses, escapes, quotes but TXT's simple ones) is read with a few string
operations; `$ORIGIN` and `$TTL` with plain values too. Any other line, and every line it
is not sure of, goes to dnspython's own reader, in runs of consecutive lines that carry
the origin, default TTL and last owner across. Both kinds of record then go through one
merge with dnspython's rules: RRsets keyed by owner (case-insensitively), type and
covered type; TTL the smallest; duplicates (in canonical form) dropped; a CNAME, SOA,
DNAME… replacing its set's record; CNAME and other data refused at the line that mixes
them. tests/unit/test_zonefile_lines.py holds the two readers to the same records.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any, Literal

import dns.exception
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.tokenizer
import dns.zonefile

_TYPES = {"A": 1, "NS": 2, "CNAME": 5, "PTR": 12, "MX": 15, "TXT": 16, "AAAA": 28}
_NAME_RDATA = frozenset({2, 5, 12})  # NS CNAME PTR: one name
_MAX_U32 = 2**32 - 1
# A line with any of these is not read here: escapes, parentheses, control or non-ASCII
# characters (dnspython's tokenizer splits on space and tab only).
_UNSURE = re.compile(r"[^\t\x20-\x7e]|[\\()]")
_LABELS = re.compile(r"(?:[A-Za-z0-9_-]{1,63}|\*)(?:\.(?:[A-Za-z0-9_-]{1,63}|\*))*\.?\Z")
_IPV4 = re.compile(r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
                   r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\Z")  # fmt: skip
_IPV6 = re.compile(r"[0-9A-Fa-f:]{2,39}\Z")
_TXT_TOKEN = re.compile(r'"([^"]*)"|([^\t ";]+)')
_SPACE = re.compile(r"[ \t]*")
_CNAME_KIND, _REGULAR, _NEUTRAL = 2, 0, 1
_NEUTRAL_TYPES = frozenset({47, 50, 25})  # NSEC NSEC3 KEY (dns.node's "neutral" types)
_RRSIG = 46
_PLAIN_REGULAR = frozenset({1, 2, 12, 15, 16, 28})  # the types read here, CNAME aside

Record = tuple[str, int, int, int, bytes]  # owner, type, TTL, line (in `texts`), RDATA wire


class LineError(Exception):
    """The file's first problem, at line `line` of `texts` (1-based)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


def _kind(rdtype: int, covers: int) -> int:
    """dns.node.NodeKind of an RRset of this type."""
    if rdtype == 5 or (rdtype == _RRSIG and covers == 5):
        return _CNAME_KIND
    if rdtype in _NEUTRAL_TYPES or (rdtype == _RRSIG and covers in _NEUTRAL_TYPES):
        return _NEUTRAL
    return _REGULAR


class _Sets:
    """The RRsets read so far, merged as dnspython's zone-file transaction merges them."""

    def __init__(self, max_records: int, cancelled: Callable[[], object], poll_every: int) -> None:
        # → (ttl, digest, wire, line) while a set holds one record (most do: a list and a
        # dict per record were most of a big zone's peak while loading), then
        # [ttl, {digest: (wire, line)}]
        self.sets: dict[tuple[str, int, int], Any] = {}
        self.kinds: dict[str, int] = {}  # owner → its node's kind (CNAME or regular)
        self.count = 0
        self.max_records = max_records
        self.cancelled = cancelled
        self.poll_every = poll_every
        self._until_poll = poll_every

    def add(
        self, owner: str, rdtype: int, covers: int, ttl: int, wire: bytes, digest: bytes, line: int
    ) -> None:
        kind = _REGULAR if rdtype in _PLAIN_REGULAR else _kind(rdtype, covers)
        node = self.kinds.get(owner, _NEUTRAL)
        if node == _CNAME_KIND and kind == _REGULAR:
            raise LineError(line, "rdataset type is not compatible with a CNAME node")
        if node == _REGULAR and kind == _CNAME_KIND:
            raise LineError(line, "CNAME rdataset is not compatible with a regular data node")
        if kind != _NEUTRAL:
            self.kinds[owner] = kind
        key = (owner, rdtype, covers)
        found = self.sets.get(key)
        added = 1
        if found is None:
            self.sets[key] = (ttl, digest, wire, line)
        else:
            if found.__class__ is tuple:  # its second record
                found = self.sets[key] = [found[0], {found[1]: (found[2], found[3])}]
            if ttl < found[0]:
                found[0] = ttl
            items = found[1]
            if dns.rdatatype.is_singleton(
                dns.rdatatype.RdataType(rdtype)
            ):  # the new record replaces the old
                self.count -= len(items)
                found[1] = {digest: (wire, line)}
            elif digest in items:
                added = 0
            else:
                items[digest] = (wire, line)
        if self.count + added > self.max_records:
            raise LineError(line, f"more than {self.max_records} records")
        self.count += added
        self._until_poll -= 1
        if self._until_poll <= 0:
            self._until_poll = self.poll_every
            self.cancelled()  # raises to abandon the load

    def records(self) -> list[Record]:
        out: list[Record] = []
        ttls: dict[int, int] = {}  # one int object per TTL (above 256 each is its own)
        for (owner, rdtype, _covers), found in self.sets.items():
            ttl = ttls.setdefault(found[0], found[0])
            if found.__class__ is tuple:
                out.append((owner, rdtype, ttl, found[3], found[2]))
                continue
            for wire, line in found[1].values():
                out.append((owner, rdtype, ttl, line, wire))
        return out


class _State:
    """What a line's meaning depends on: the origin, the default TTL, the last owner."""

    def __init__(self, origin: str, default_ttl: int) -> None:
        self.origin_name = dns.name.from_text(origin)
        self.origin: str | None = origin  # its text while plain, else None
        self.origin_wire = _wire(origin)
        self.default_ttl = default_ttl
        self.last_name: dns.name.Name | None = self.origin_name
        self.last: str | None = origin.lower()  # the last owner, while plain and in the zone
        self.last_text = origin

    def set_origin(self, name: dns.name.Name) -> None:
        self.origin_name = name
        text = name.to_text()
        plain = text == "." or _LABELS.match(text) is not None
        self.origin = text if plain else None
        self.origin_wire = _wire(text) if plain else b""


def _wire(absolute: str) -> bytes:
    if absolute == ".":
        return b"\x00"
    return b"".join(bytes((len(p),)) + p.encode() for p in absolute[:-1].split(".")) + b"\x00"


def _absolute(text: str, origin: str) -> str | None:
    """A plain name's absolute text (case kept), None if not plain or too long."""
    if text == "@":
        return origin
    if text[-1] == ".":
        if text == ".":
            return text
        full = text
    elif origin == ".":
        full = text + "."
    else:
        full = text + "." + origin
    if len(full) > 254 or _LABELS.match(text) is None:
        return None
    return full


def _ttl(token: str) -> int | None:
    if token.isdigit() and len(token) <= 10:
        value = int(token)
        if value <= _MAX_U32:
            return value
    return None


def read_lines(
    texts: list[str],
    zone: str,
    default_ttl: int,
    *,
    max_records: int,
    cancelled: Callable[[], object],
    poll_every: int = 1024,
) -> list[Record]:
    """The records of the zone file whose lines (includes spliced in) are `texts`, zone
    origin `zone` (lower case, absolute); raises LineError at the first problem.
    `cancelled` is called every `poll_every` records: it raises to abandon the load."""
    sets = _Sets(max_records, cancelled, poll_every)
    state = _State(zone, default_ttl)
    inside = "." + zone if zone != "." else ""
    total = len(texts)
    at = 0
    while at < total:
        while at < total:
            text = texts[at]
            if not text or text[0] == ";":
                at += 1
                continue
            if text[0] == "$":
                if not _directive(text, state):
                    break
                at += 1
                continue
            read = _record(text, state, inside)
            if read is None:
                break
            if read is not True:
                owner, rdtype, ttl, wire, digest = read
                sets.add(owner, rdtype, 0, ttl, wire, digest, at + 1)
            at += 1
        if at == total:
            break
        # From `at`: lines for dnspython, up to the next line read here.
        end = at + 1
        while end < total and _unsure(texts[end], state):
            end += 1
        at = _dnspython(texts, at, end, zone, state, sets)
    return sets.records()


def _unsure(text: str, state: _State) -> bool:
    """Whether dnspython reads this line (a guess ahead: state may change before it)."""
    if not text or text[0] == ";":
        return False
    if text[0] == "$":
        return True
    return _record(text, state, "", check_only=True) is None


def _directive(text: str, state: _State) -> bool:
    """A plain `$ORIGIN name.` or `$TTL n` applied; False for any other directive."""
    cut = text.find(";")
    parts = (text if cut < 0 else text[:cut]).split()
    if len(parts) != 2 or _UNSURE.search(text):
        return False
    word = parts[0].upper()
    if word == "$TTL":
        ttl = _ttl(parts[1])
        if ttl is None:
            return False
        state.default_ttl = ttl
        return True
    if (
        word == "$ORIGIN"
        and parts[1][-1] == "."
        and (parts[1] == "." or (_LABELS.match(parts[1]) and len(parts[1]) <= 254))
    ):
        state.set_origin(dns.name.from_text(parts[1]))
        return True
    return False


def _record(
    text: str, state: _State, inside: str, check_only: bool = False
) -> tuple[str, int, int, bytes, bytes] | Literal[True] | None:
    """One record line read here: (owner, type, TTL, RDATA wire, canonical RDATA); True
    for a line with nothing on it; None when dnspython must read it."""
    origin = state.origin
    if origin is None or _UNSURE.search(text):
        return None
    quote = text.find('"')
    cut = text.find(";")
    if quote >= 0 and 0 <= cut < quote:
        quote = -1  # the quote is in the comment
    head = text if quote < 0 else text[:quote]
    if quote < 0 and cut >= 0:
        head = text[:cut]
    tokens = head.split()
    if not tokens:
        return True if quote < 0 else None
    blank = text[0] == " " or text[0] == "\t"
    i = 0 if blank else 1
    if len(tokens) <= i:
        return None
    ttl = None
    token = tokens[i]
    seen_class = False
    while True:  # a TTL and the class IN, in either order, each at most once
        if ttl is None and "0" <= token[0] <= "9":
            ttl = _ttl(token)
            if ttl is None:
                return None
        elif not seen_class and token.upper() == "IN":
            seen_class = True
        else:
            break
        i += 1
        if i >= len(tokens):
            return None
        token = tokens[i]
    rdtype = _TYPES.get(token.upper())
    if rdtype is None or (quote >= 0 and rdtype != 16):
        return None
    if check_only:
        return True
    full = state.last_text
    if blank:
        owner = state.last
        if owner is None:
            return None
    else:
        absolute = _absolute(tokens[0], origin)
        if absolute is None:
            return None
        full = absolute
        owner = full.lower()
        if not (owner.endswith(inside) or owner == inside[1:] or not inside):
            return None  # dnspython skips a name outside the zone
    rdata = tokens[i + 1 :]
    if rdtype == 16:
        wire = _txt(rdata, text, quote, head)
        if wire is None:
            return None
        digest = wire
    elif rdtype == 1:
        if len(rdata) != 1 or _IPV4.match(rdata[0]) is None:
            return None
        wire = digest = bytes(map(int, rdata[0].split(".")))
    elif rdtype == 28:
        if len(rdata) != 1 or not _plain_ipv6(rdata[0]):
            return None
        try:
            wire = digest = ipaddress.IPv6Address(rdata[0]).packed
        except ValueError:
            return None
    else:
        if rdtype == 15:
            if len(rdata) != 2 or not rdata[0].isdigit() or len(rdata[0]) > 5:
                return None
            preference = int(rdata[0])
            if preference > 0xFFFF:
                return None
            name = rdata[1]
        elif len(rdata) != 1:
            return None
        else:
            name = rdata[0]
        target = _absolute(name, origin)
        if target is None:
            return None
        wire = _wire(target)
        if rdtype == 15:
            wire = preference.to_bytes(2, "big") + wire
        digest = wire.lower()  # RFC 4034 §6.2: these types' names compare in lower case
    if ttl is None:
        ttl = state.default_ttl
    if not blank:
        state.last, state.last_text, state.last_name = owner, full, None
    return owner, rdtype, ttl, wire, digest


def _plain_ipv6(text: str) -> bool:
    """Hex groups and one `::` at most, as few as both readers agree on."""
    if _IPV6.match(text) is None:
        return False
    colons = text.count(":")
    return colons <= 7 if "::" in text else colons == 7


def _txt(rdata: list[str], text: str, quote: int, head: str) -> bytes | None:
    """TXT strings: unquoted tokens, then (from `quote`) quoted or unquoted ones, each
    apart from the next."""
    strings = [token.encode() for token in rdata]
    if quote >= 0:
        if head and head[-1] not in " \t":
            return None
        pos, end = quote, len(text)
        while pos < end and text[pos] != ";":
            match = _TXT_TOKEN.match(text, pos)
            if match is None:
                return None
            value = match.group(1)
            strings.append((value if value is not None else match.group(2)).encode())
            pos = match.end()
            gap = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            if gap == pos and pos < end and text[pos] != ";":
                return None  # two tokens with nothing between: left to dnspython
            pos = gap
    if not strings or any(len(s) > 255 for s in strings):
        return None
    return b"".join(bytes((len(s),)) + s for s in strings)


class _Events(dns.zonefile.RRsetsReaderTransaction):
    """dnspython's reader's records, in the order read, with the line of each."""

    def __init__(self, manager: Any, line_of: Callable[[], int]) -> None:
        super().__init__(manager, True, False)
        self.events: list[tuple[int, dns.name.Name, int, Any]] = []
        self.line_of = line_of
        self.origin = manager.origin

    def add(self, *args: Any) -> None:
        name, ttl, rdata = args
        if rdata.rdtype == dns.rdatatype.SOA and name != self.origin:
            raise ValueError("add() has non-origin SOA")  # as dnspython's transaction
        self.events.append((self.line_of(), name, ttl, rdata))


def _dnspython(
    texts: list[str], start: int, end: int, zone: str, state: _State, sets: _Sets
) -> int:
    """Lines start..end read by dnspython's reader (more, if a record runs past `end`),
    their records merged; returns the line after the last one read."""
    total = len(texts)
    extra = 1
    while True:
        text = "\n".join(texts[start:end]) + "\n"
        tok = dns.tokenizer.Tokenizer(text, "<zone>")

        def line_now(tok: Any = tok, text: str = text) -> int:
            # The tokenizer counts a line once it has read its newline: a record (or an
            # error found at its end) belongs to the line before.
            line = tok.where()[1]
            position = tok.file.tell()
            return line - 1 if position > 0 and text[position - 1] == "\n" else line

        events = _Events(dns.zonefile.RRSetsReaderManager(
            dns.name.from_text(zone), False, dns.rdataclass.IN), line_now)  # fmt: skip
        reader = dns.zonefile.Reader(
            tok, dns.rdataclass.IN, events, allow_include=False, default_ttl=state.default_ttl
        )
        reader.current_origin = state.origin_name
        reader.last_name = (
            state.last_name if state.last_name is not None else dns.name.from_text(state.last_text)
        )
        failure: LineError | None = None
        try:
            reader.read()
        except dns.exception.SyntaxError as exc:
            message = re.split(r":(\d+): ", str(exc), maxsplit=1)[-1]
            failure = LineError(line_now(), message)
        except Exception as exc:  # dnspython raises more than DNSException on hostile text
            failure = LineError(line_now(), str(exc) or type(exc).__name__)
        if failure is not None and failure.line >= end - start and end < total:
            end = min(total, end + extra)  # a record may go on past `end`: read more
            extra *= 2
            continue
        break
    for line, name, ttl, rdata in events.events:
        sets.add(
            name.to_text().lower(),
            rdata.rdtype,
            rdata.covers(),
            ttl,
            rdata.to_wire(),
            rdata.to_digestable(dns.name.root),
            start + line,
        )
    if failure is not None:
        raise LineError(start + max(failure.line, 1), failure.message)
    state.set_origin(reader.current_origin)
    state.default_ttl = reader.default_ttl
    last = reader.last_name
    state.last_name = last
    state.last_text = last.to_text()
    owner = state.last_text.lower()
    in_zone = last.is_subdomain(dns.name.from_text(zone))
    plain = owner == "." or _LABELS.match(owner) is not None
    state.last = owner if in_zone and plain else None
    return end
