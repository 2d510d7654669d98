"""What every signature dnsd makes shares: its validity window and the signing itself
(dnsd.dnssec.signer signs RRsets, dnsd.dnssec.denial the negative answers' bytes).

Signatures hold from an hour before the start of the current day to seven days after it.
"""

from __future__ import annotations

from typing import Final

from dnsd.dnssec import wire

DAY: Final = 86400
VALIDITY_DAYS: Final = 7


class _Switches:
    corrupt = (
        False  # every signature broken: a test proves validators check (--test-corrupt-signatures)
    )


SWITCHES = _Switches()


def window(now: float) -> tuple[int, int]:
    """(inception, expiration) of the signatures made now."""
    start = int(now) // DAY * DAY
    return start - 3600, start + VALIDITY_DAYS * DAY


def make_signature(key: object, data: bytes) -> bytes:
    """The signature over `data` (broken on purpose when SWITCHES.corrupt)."""
    sig = wire.signature(key, data)  # type: ignore[arg-type]
    if SWITCHES.corrupt:
        return bytes([sig[0] ^ 0xFF]) + sig[1:]
    return sig
