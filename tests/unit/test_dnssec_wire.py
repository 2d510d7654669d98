"""The wire pieces of online signing: NSEC bitmaps and the next name of compact denial
(RFC 4471 successors for names with no room for `\\000.`), and RRSIG label counts."""

from __future__ import annotations

from collections.abc import Callable

import dns.name
import pytest
from dns.rdtypes.ANY.NSEC import Bitmap

from dnsd.dnssec.wire import NXNAME_BITMAP, bitmap, label_count, successor

APEX = dns.name.from_text("example.test.")


def name_of(octets: int, last: bytes = b"x") -> dns.name.Name:
    """A name below APEX of exactly `octets` octets; its first label ends with `last`."""
    room = octets - len(APEX.to_wire() or b"")
    labels = []
    while room > 64:
        size = 62 if room - 64 == 1 else 63
        labels.append(b"y" * size)
        room -= size + 1
    labels.insert(0, b"x" * (room - 2) + last)
    name = dns.name.Name([*labels, *APEX.labels])
    assert len(name.to_wire() or b"") == octets
    return name


def test_bitmaps_match_dnspython() -> None:
    for types in ([1, 46, 47], [1, 2, 6, 15, 16, 46, 47, 48, 59, 60, 257], [46, 47, 128]):
        expected = b"".join(
            bytes([window, len(bits)]) + bits for window, bits in Bitmap.from_rdtypes(types).windows
        )
        assert bitmap(types) == expected
    assert bitmap([46, 47, 128]) == NXNAME_BITMAP


@pytest.mark.parametrize(
    ("octets", "last", "first_label"),
    [
        (20, b"x", None),  # room for `\000.name`
        (253, b"x", None),
        (254, b"x", lambda label: label + b"\x00"),  # one octet of room: a zero octet more
        (254, b"\xff", lambda label: label + b"\x00"),
        (255, b"x", lambda label: label[:-1] + b"y"),  # no room: RFC 4471 §3.1.2, +1
        (255, b"@", lambda label: label[:-1] + b"["),  # A–Z sort as a–z: skipped
        (255, b"\xff", lambda label: label[:-2] + b"y"),  # 0xFF dropped, the one before +1
    ],
)
def test_the_next_name_follows_and_fits(
    octets: int, last: bytes, first_label: Callable[[bytes], bytes] | None
) -> None:
    name = name_of(octets, last)
    wire = name.canonicalize().to_wire()
    assert wire is not None
    after = successor(wire)
    following = dns.name.from_wire(after, 0)[0]
    assert len(after) <= 255 and following > name  # canonical order (RFC 4034 §6.1)
    if first_label is None:
        assert following == dns.name.Name((b"\x00", *name.labels))
    else:  # the same parent: no name fits between (any would be longer than 255 octets)
        assert following.labels == (first_label(name.labels[0]), *name.labels[1:])


def test_label_counts_leave_out_a_leading_wildcard() -> None:
    assert label_count(dns.name.from_text("a.example.test.").to_wire() or b"") == 3
    assert label_count(dns.name.from_text("*.example.test.").to_wire() or b"") == 2
    assert label_count(b"\x00") == 0
