"""DNS cookies (RFC 7873) with interoperable server cookies (RFC 9018), pure.

A server cookie is Version 1 | Reserved | Timestamp | SipHash-2-4(client cookie | version
| reserved | timestamp | client address) keyed with this hour's secret. Secrets come from
one master key (STATE_DIR/cookie.key, shared by every `--workers` process): the secret
of hour H is HMAC-SHA256(master, H) cut to 16 bytes, so they rotate every hour with no
coordination, and a cookie is checked with the secret of the hour its timestamp names.
A cookie is accepted for an hour after its timestamp (and 5 minutes ahead, for clocks);
every reply carries a fresh one.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import struct
from dataclasses import dataclass, field
from typing import Final

import siphashc

COOKIE_OPTION: Final = 10
CLIENT_LEN: Final = 8
SERVER_MIN, SERVER_MAX = 8, 32
VERSION: Final = 1
ROTATE_S: Final = 3600
LIFETIME_S: Final = 3600  # RFC 9018 §4.3: at most one hour old
AHEAD_S: Final = 300  # … and at most 5 minutes in the future

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class CookieFormErr(ValueError):
    """A COOKIE option of a length RFC 7873 §5.2.2 answers with FORMERR."""


def split(option: bytes) -> tuple[bytes, bytes]:
    """(client cookie, server cookie or b"") of a COOKIE option; raises CookieFormErr."""
    size = len(option)
    if size != CLIENT_LEN and not CLIENT_LEN + SERVER_MIN <= size <= CLIENT_LEN + SERVER_MAX:
        raise CookieFormErr(f"COOKIE option of {size} bytes")
    return option[:CLIENT_LEN], option[CLIENT_LEN:]


@dataclass(frozen=True, slots=True)
class ServerCookies:
    master: bytes = field(repr=False)
    _secrets: dict[int, bytes] = field(default_factory=dict, repr=False, compare=False)

    def secret(self, hour: int) -> bytes:
        found = self._secrets.get(hour)
        if found is None:
            if len(self._secrets) > 4:
                self._secrets.clear()
            found = hmac.new(self.master, struct.pack("!Q", hour), hashlib.sha256).digest()[:16]
            self._secrets[hour] = found
        return found

    def make(self, client_cookie: bytes, address: IPAddress, now: float) -> bytes:
        """The 16-byte server cookie for this client, stamped now."""
        stamp = int(now) & 0xFFFFFFFF
        return self.compute(client_cookie, address, stamp, self.secret(int(now) // ROTATE_S))

    def valid(
        self, client_cookie: bytes, server_cookie: bytes, address: IPAddress, now: float
    ) -> bool:
        """Whether `server_cookie` is one this server made for this client within its life."""
        if len(server_cookie) != 16 or server_cookie[0] != VERSION:
            return False
        (stamp,) = struct.unpack_from("!I", server_cookie, 4)
        age = (int(now) - stamp) & 0xFFFFFFFF
        if age > LIFETIME_S and (stamp - int(now)) & 0xFFFFFFFF > AHEAD_S:
            return False
        base = int(now) - age if age <= LIFETIME_S else int(now) + ((stamp - int(now)) & 0xFFFFFFFF)
        expected = self.compute(client_cookie, address, stamp, self.secret(base // ROTATE_S))
        return hmac.compare_digest(expected, server_cookie)

    @staticmethod
    def compute(client_cookie: bytes, address: IPAddress, stamp: int, secret: bytes) -> bytes:
        head = struct.pack("!BBHI", VERSION, 0, 0, stamp)
        digest = siphashc.siphash(secret, client_cookie + head + address.packed)
        return head + struct.pack("<Q", digest)
