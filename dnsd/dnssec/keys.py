"""DNSSEC keys: STATE_DIR/keys/ZONE/K<zone>+<alg>+<tag>.json, one file per key, mode 0600,
holding the PEM private key and its role and state. Key material comes from the
`cryptography` package through dnspython's DNSSEC module (DNSKEY, key tags, DS, CDS).

dnsd uses one combined signing key (CSK, flags 257) per zone and algorithm: it signs the
DNSKEY set and every other RRset. `ensure_keys` makes one at the first start when a zone
asks for DNSSEC and has none; `dnsd keys generate` makes one ahead of time. Private keys
are never logged and never leave this module but as objects the signer uses.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import dns.dnssec
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.DNSKEY
import dns.rrset
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from dnsd.health.overrides import write_atomically

ALGORITHMS: Final = {13: "ECDSAP256SHA256", 15: "ED25519"}
CSK_FLAGS: Final = 257  # ZONE | SEP
DNSKEY_TTL: Final = 3600
MAX_KEY_FILE: Final = 64 << 10

PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@dataclass(frozen=True, slots=True)
class ZoneKey:
    zone: str
    algorithm: int
    tag: int
    role: str  # "csk"
    state: str  # "active" | "published" | "retired"
    created: float
    dnskey: dns.rdtypes.ANY.DNSKEY.DNSKEY
    private: PrivateKey = field(repr=False)

    def ds(self, digest: str = "SHA256") -> Any:
        return dns.dnssec.make_ds(self.zone, self.dnskey, digest)


@dataclass(frozen=True, slots=True)
class ZoneKeys:
    """A zone's keys: those in the DNSKEY set, and the one that signs."""

    zone: str
    keys: tuple[ZoneKey, ...]

    @property
    def signing(self) -> ZoneKey:
        return next(k for k in self.keys if k.state == "active")

    def dnskey_rrset(self) -> dns.rrset.RRset:
        rrset = dns.rrset.RRset(
            dns.name.from_text(self.zone), dns.rdataclass.IN, dns.rdatatype.DNSKEY
        )
        for key in self.keys:
            if key.state in ("active", "published"):
                rrset.add(key.dnskey, DNSKEY_TTL)
        return rrset


def key_dir(state_dir: Path, zone: str) -> Path:
    return state_dir / "keys" / zone.rstrip(".").lower()


def generate(state_dir: Path, zone: str, algorithm: int, state: str = "active") -> ZoneKey:
    """A new CSK for `zone`, written to the state directory (mode 0600)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm {algorithm}: one of {sorted(ALGORITHMS)}")
    private: PrivateKey = (
        ec.generate_private_key(ec.SECP256R1())
        if algorithm == 13
        else ed25519.Ed25519PrivateKey.generate()
    )
    dnskey = dns.dnssec.make_dnskey(private.public_key(), algorithm, flags=CSK_FLAGS)
    key = ZoneKey(
        zone, algorithm, dns.dnssec.key_id(dnskey), "csk", state, time.time(), dnskey, private
    )
    _write(state_dir, key)
    return key


def load(state_dir: Path, zone: str) -> ZoneKeys:
    """Every key of `zone` in the state directory (no files: no keys)."""
    directory = key_dir(state_dir, zone)
    keys = []
    for path in sorted(directory.glob("K*.json")) if directory.is_dir() else []:
        if path.stat().st_size > MAX_KEY_FILE:
            raise ValueError(f"{path}: larger than {MAX_KEY_FILE} bytes")
        document = json.loads(path.read_text(encoding="utf-8"))
        private = serialization.load_pem_private_key(
            document["private_pem"].encode(), password=None
        )
        if not isinstance(private, ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
            raise ValueError(f"{path}: not an ECDSA or Ed25519 key")
        algorithm = int(document["algorithm"])
        dnskey = dns.dnssec.make_dnskey(private.public_key(), algorithm, flags=CSK_FLAGS)
        keys.append(
            ZoneKey(zone, algorithm, dns.dnssec.key_id(dnskey), str(document["role"]),
                    str(document["state"]), float(document["created"]), dnskey, private)
        )  # fmt: skip
    return ZoneKeys(zone, tuple(keys))


def ensure_keys(state_dir: Path, zone: str, algorithm: int, create: bool) -> ZoneKeys:
    """The zone's keys, with an active key of `algorithm` made first when there is none
    (and `create`: a `--workers` process only reads what the main process made)."""
    keys = load(state_dir, zone)
    if not any(k.state == "active" and k.algorithm == algorithm for k in keys.keys) and create:
        generate(state_dir, zone, algorithm)
        keys = load(state_dir, zone)
    if not any(k.state == "active" for k in keys.keys):
        raise ValueError(f"zone {zone}: no active DNSSEC key in {key_dir(state_dir, zone)}")
    return keys


def _write(state_dir: Path, key: ZoneKey) -> None:
    pem = key.private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    document = {"zone": key.zone, "algorithm": key.algorithm, "tag": key.tag, "role": key.role,
                "state": key.state, "created": key.created, "private_pem": pem}  # fmt: skip
    directory = key_dir(state_dir, key.zone)
    old = os.umask(0o077)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"K{key.zone.rstrip('.')}.+{key.algorithm:03d}+{key.tag:05d}.json"
        write_atomically(path, json.dumps(document, indent=1) + "\n")
    finally:
        os.umask(old)
