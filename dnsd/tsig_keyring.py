"""The TSIG keys of the config as dnspython's key ring, built once per load: the snapshot
carries it, dnsd.xfr.tsig checks and signs messages with it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import dns.name
import dns.tsig

from dnsd.config.model import TsigKey

ALGORITHMS: Final = {"hmac-sha256": dns.tsig.HMAC_SHA256, "hmac-sha512": dns.tsig.HMAC_SHA512}

Keyring = Mapping[dns.name.Name, dns.tsig.Key]


def keyring(keys: Mapping[str, TsigKey]) -> dict[dns.name.Name, dns.tsig.Key]:
    out = {}
    for key in keys.values():
        name = dns.name.from_text(key.name)
        out[name] = dns.tsig.Key(name, key.secret, ALGORITHMS[key.algorithm])
    return out
