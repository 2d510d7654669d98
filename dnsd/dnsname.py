"""Names as the zone tree keys them: one text form for any bytes (pure).

A key is dnspython's presentation form of the lower-cased name (`name.to_text()` after
`canonicalize()`): absolute, letters lower-cased (ASCII only, RFC 4343), a "." inside a
label written `\\.`, the other specials `"().;\\@$` as `\\c`, bytes outside 0x21-0x7e as
`\\DDD` (decimal, RFC 1035 §5.1). Ordinary names (`www.example.test.`) are their own key,
so the common path stays plain string work; only a key with a backslash needs the
escape-aware helpers below, and they check for it first.
"""

from __future__ import annotations

import functools
import re
from typing import Final

import dns.name
from dnslib import DNSLabel

_ESCAPED: Final = frozenset(b'"().;\\@$')
_PLAIN_BYTES: Final = re.compile(rb"[a-z0-9_*-]+(?:\.[a-z0-9_*-]+)*")
_PLAIN_KEY: Final = re.compile(r"[a-z0-9_*-]+(?:\.[a-z0-9_*-]+)*\.")


# The bytes a configured name's labels have (letters, digits, hyphen, underscore, the
# wildcard): a query name with any other takes the full path (dnsd/_fastloop.c: name_lower).
NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_*")


def escape_label(label: bytes) -> str:
    """One lower-cased label in key form (dnspython's escaping, byte for byte)."""
    out = []
    for byte in label.lower():
        if byte in _ESCAPED:
            out.append("\\" + chr(byte))
        elif 0x20 < byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03d}")
    return "".join(out)


def key_of(name: dns.name.Name) -> str:
    """A dnspython name's key."""
    return name.canonicalize().to_text()


def key_of_labels(labels: tuple[bytes, ...] | list[bytes]) -> str:
    """The key of a name given as its labels without the root label (dnslib's form)."""
    if not labels:
        return "."
    joined = b".".join(labels).lower()
    # Most names: letters, digits, "-", "_", "*" only, and no label holding a dot.
    if _PLAIN_BYTES.fullmatch(joined) and joined.count(b".") == len(labels) - 1:
        return joined.decode("ascii") + "."
    return ".".join(escape_label(label) for label in labels) + "."


_PLAIN_TEXT: Final = re.compile(r"[A-Za-z0-9_*-]{1,63}(?:\.[A-Za-z0-9_*-]{1,63})*\.?")


def parse_name(text: str, origin: str | None = None) -> str:
    """Presentation text (relative to `origin` unless absolute; `@` is the origin) → key.
    Raises dns.exception.DNSException (a subclass) on a bad name; non-ASCII text is IDNA.
    A plain name under a plain origin is joined as text (what dnspython gives for it,
    without building two Name objects per record: most of `dnsd check`'s time on a
    100,000-record zone); anything else goes through dnspython."""
    text = text.strip()
    base_key = "." if origin is None else origin
    if _PLAIN_TEXT.fullmatch(text) and (base_key == "." or _PLAIN_KEY.fullmatch(base_key)):
        if text.endswith("."):
            key = text.lower()
        else:
            key = text.lower() + ("." if base_key == "." else "." + base_key)
        if len(key) + 1 <= 255:  # a plain key's wire form is one byte longer than it
            return key
    return key_of(dns.name.from_text(text, origin=_origin_name(origin)))


@functools.lru_cache(maxsize=64)
def _origin_name(origin: str | None) -> dns.name.Name:
    return dns.name.from_text(origin) if origin is not None else dns.name.root


def name_error(exc: Exception) -> str:
    """A short reason for dnspython's complaint about a name."""
    reasons: dict[type, str] = {
        dns.name.EmptyLabel: "empty label",
        dns.name.LabelTooLong: "label longer than 63 octets",
        dns.name.NameTooLong: "name longer than 255 octets",
        dns.name.BadEscape: "bad escape (\\DDD is decimal, 000-255)",
    }
    return reasons.get(type(exc), str(exc))


def labels(key: str) -> list[str]:
    """The key's labels, each still in key form (`a\\.b` stays one label)."""
    if key == ".":
        return []
    if "\\" not in key:
        return key[:-1].split(".") if key.endswith(".") else key.split(".")
    out: list[str] = []
    start = i = 0
    while i < len(key):
        char = key[i]
        if char == "\\":
            i += 4 if key[i + 1 : i + 2].isdigit() else 2
            continue
        if char == ".":
            out.append(key[start:i])
            start = i + 1
        i += 1
    if start < len(key):
        out.append(key[start:])
    return out


def parent(key: str) -> str:
    """The key one label up (the root's parent is the root)."""
    if "\\" not in key:
        return key.split(".", 1)[1] or "." if key != "." else "."
    rest = labels(key)[1:]
    return ".".join(rest) + "." if rest else "."


def is_below_or_at(key: str, zone: str) -> bool:
    """`key` is `zone` or a name under it (a label's escaped dot is not a boundary)."""
    if zone == "." or key == zone:
        return True
    if not key.endswith("." + zone):
        return False
    head = key[: -len(zone) - 1]
    # The dot before `zone` is a boundary unless a backslash escapes it.
    return (len(head) - len(head.rstrip("\\"))) % 2 == 0


def label_count(key: str) -> int:
    return len(labels(key))


def to_label(key: str) -> DNSLabel:
    """The key as a dnslib name for packing. A plain key goes straight to dnslib; one
    with escapes or other bytes is read by dnspython (dnslib's own text reader splits at
    every dot and reads `\\DDD` wrongly)."""
    if _PLAIN_KEY.fullmatch(key):  # ASCII labels: what dnslib's IDNA encoding gives, faster
        return DNSLabel(key[:-1].encode().split(b"."))
    if key == ".":
        return DNSLabel([])
    return DNSLabel(list(dns.name.from_text(key).labels[:-1]))


def wire_length(key: str) -> int:
    """The name's length on the wire (RFC 1035 §2.3.4 caps it at 255)."""
    if "\\" not in key:
        return 1 if key == "." else len(key) + 1
    return len(dns.name.from_text(key).to_wire() or b"")


def name_end(wire: bytes, pos: int, pointers: bool = True) -> int | None:
    """Where the wire-format name at `pos` ends: after its root label, or after its
    compression pointer when `pointers` (a question as sent never has one). None when the
    name is malformed (a reserved label type) or cut short. With `wire_labels`, the only
    code that walks a wire name's labels."""
    end = len(wire)
    while pos < end:
        length = wire[pos]
        if length == 0:
            return pos + 1
        if length & 0xC0:
            return pos + 2 if pointers and length & 0xC0 == 0xC0 and pos + 2 <= end else None
        pos += length + 1
    return None


def wire_labels(name: bytes) -> list[bytes]:
    """The labels of an uncompressed wire name that `name_end` accepted, as sent (case
    kept), without the root label: `key_of_labels` makes the lookup's key of them."""
    labels, pos = [], 0
    while name[pos]:
        labels.append(name[pos + 1 : pos + 1 + name[pos]])
        pos += name[pos] + 1
    return labels
