"""DNSSEC keys: STATE_DIR/keys/ZONE/K<zone>.+<alg>+<tag>.json, one file per key, mode 0600,
holding the PEM private key, its role and its timetable. Key material comes from the
`cryptography` package through dnspython's DNSSEC module (DNSKEY, key tags, DS, CDS).

Roles: a combined signing key (`csk`, flags 257) signs everything; with `split_keys` a
`ksk` (257) signs the DNSKEY set and a `zsk` (256) signs the rest. A key's state is a pure
function of its timetable and the time — published (in the DNSKEY set, not signing),
active (signing), retired (still in the DNSKEY set: signatures it made may be cached),
removed — so every process (`--workers`) derives the same states with no coordination.

`dnsd keys roll ZONE` runs a pre-publish ZSK roll (RFC 6781 §4.1.1.1): the new ZSK is
published now and signs from one DNSKEY TTL (plus a margin) later, when the old one
retires; the old one leaves the DNSKEY set once the longest TTL of the zone (plus the
margin) has passed, so no resolver holds a signature it can no longer check. Private keys
are never logged.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import dns.dnssec
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.DNSKEY
import dns.rrset
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from dnsd.atomic_files import write_file
from dnsd.zone_keys import ZoneKey, ZoneKeys

if TYPE_CHECKING:
    from dnsd.zone_keys import PrivateKey

ALGORITHMS: Final = {13: "ECDSAP256SHA256", 15: "ED25519"}
FLAGS: Final = {"csk": 257, "ksk": 257, "zsk": 256}  # ZONE | SEP for keys the DS points at
MARGIN_S: Final = 2.0  # added to every wait of a roll: clocks and propagation
MAX_KEY_FILE: Final = 64 << 10


def key_dir(state_dir: Path, zone: str) -> Path:
    return state_dir / "keys" / zone.rstrip(".").lower()


def generate(
    state_dir: Path,
    zone: str,
    algorithm: int,
    role: str = "csk",
    publish: float | None = None,
    activate: float | None = None,
) -> ZoneKey:
    """A new key for `zone`, written to the state directory (mode 0600)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm {algorithm}: one of {sorted(ALGORITHMS)}")
    private: PrivateKey = (
        ec.generate_private_key(ec.SECP256R1())
        if algorithm == 13
        else ed25519.Ed25519PrivateKey.generate()
    )
    dnskey = dns.dnssec.make_dnskey(private.public_key(), algorithm, flags=FLAGS[role])
    now = time.time()
    publish = now if publish is None else publish
    key = ZoneKey(
        zone,
        algorithm,
        dns.dnssec.key_id(dnskey),
        role,
        publish,
        publish if activate is None else activate,
        None,
        None,
        dnskey,
        private,
    )
    _write(state_dir, key)
    return key


def load(state_dir: Path, zone: str, now: float) -> ZoneKeys:
    """Every key of `zone` in the state directory (no files: no keys), as they stand now."""
    directory = key_dir(state_dir, zone)
    keys = []
    for path in sorted(directory.glob("K*.json")) if directory.is_dir() else []:
        if path.stat().st_size > MAX_KEY_FILE:
            raise ValueError(f"{path}: larger than {MAX_KEY_FILE} bytes")
        document = json.loads(path.read_text(encoding="utf-8"))
        private = serialization.load_pem_private_key(document["private_pem"].encode(), None)
        if not isinstance(private, ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
            raise ValueError(f"{path}: not an ECDSA or Ed25519 key")
        role = str(document["role"])
        if role not in FLAGS:
            raise ValueError(f"{path}: role {role!r} is not one of {', '.join(FLAGS)}")
        algorithm = int(document["algorithm"])
        dnskey = dns.dnssec.make_dnskey(private.public_key(), algorithm, flags=FLAGS[role])
        keys.append(
            ZoneKey(
                zone,
                algorithm,
                dns.dnssec.key_id(dnskey),
                role,
                float(document["publish"]),
                float(document["activate"]),
                _time(document.get("retire")),
                _time(document.get("remove")),
                dnskey,
                private,
            )
        )
    return ZoneKeys(zone, tuple(keys), now)


def ensure_keys(
    state_dir: Path, zone: str, algorithm: int, create: bool, split: bool = False
) -> ZoneKeys:
    """The zone's keys, made first when nothing signs (and `create`: a `--workers` process
    only reads what the main process made): a CSK, or a KSK and a ZSK with `split`."""
    now = time.time()
    keys = load(state_dir, zone, now)
    if not keys.keys and create:
        for role in ("ksk", "zsk") if split else ("csk",):
            generate(state_dir, zone, algorithm, role, publish=now)
        keys = load(state_dir, zone, now)
    for rdtype in (dns.rdatatype.DNSKEY, dns.rdatatype.A):
        try:
            keys.signer_for(rdtype)
        except StopIteration:
            raise ValueError(
                f"zone {zone}: no active key signs {dns.rdatatype.to_text(rdtype)} records "
                f"in {key_dir(state_dir, zone)}"
            ) from None
    return keys


def roll(state_dir: Path, zone: str, dnskey_ttl: int, max_ttl: int, now: float) -> ZoneKey:
    """Start a pre-publish ZSK roll; returns the new ZSK."""
    keys = load(state_dir, zone, now)
    old = [k for k in keys.keys if k.role == "zsk" and k.state(now) == "active"]
    if not old:
        raise ValueError(
            f"zone {zone}: no active ZSK to roll (a CSK changes with the DS: roll --ksk)"
        )
    if any(k.role == "zsk" and k.state(now) == "published" for k in keys.keys):
        raise ValueError(f"zone {zone}: a ZSK roll is already under way")
    switch = now + dnskey_ttl + MARGIN_S
    new = generate(state_dir, zone, old[0].algorithm, "zsk", publish=now, activate=switch)
    for key in old:
        _write(state_dir, replace(key, retire=switch, remove=switch + max_ttl + MARGIN_S))
    return new


PENDING: Final = 1e18  # "activate" of a key waiting for its DS at the parent


def roll_sep(
    state_dir: Path, zone: str, dnskey_ttl: int, max_ttl: int, now: float, ds_seen: bool
) -> ZoneKey:
    """A double-DS roll of the key the parent's DS points at (KSK or CSK), RFC 6781 §4.1.2,
    in two steps. First: a new key joins the DNSKEY set (signing nothing yet) and the CDS
    set, so `dnsd keys list` and CDS show both DS records for the parent. Then, once the
    parent serves both and its old DS TTL has passed (`ds_seen`): the new key signs from one
    DNSKEY TTL after it was published, the old one retires then and leaves the DNSKEY set
    after the zone's longest TTL — then the parent may drop the old DS."""
    keys = load(state_dir, zone, now)
    sep = [k for k in keys.keys if k.role in ("ksk", "csk")]
    pending = [k for k in sep if k.activate >= PENDING]
    if not ds_seen:
        if pending:
            raise ValueError(
                f"zone {zone}: a {pending[0].role.upper()} roll waits for its DS "
                "(roll --ksk --ds-seen once the parent serves it)"
            )
        old = keys.signer_for(dns.rdatatype.DNSKEY)
        return generate(state_dir, zone, old.algorithm, old.role, publish=now, activate=PENDING)
    if not pending:
        raise ValueError(f"zone {zone}: no KSK/CSK roll under way (start one with roll --ksk)")
    new = pending[0]
    switch = max(now, new.publish + dnskey_ttl) + MARGIN_S
    for old in sep:
        if old is not new and old.state(now) == "active":
            _write(state_dir, replace(old, retire=switch, remove=switch + max_ttl + MARGIN_S))
    new = replace(new, activate=switch)
    _write(state_dir, new)
    return new


def _time(value: Any) -> float | None:
    return None if value is None else float(value)


def _write(state_dir: Path, key: ZoneKey) -> None:
    pem = key.private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    document = {
        "zone": key.zone,
        "algorithm": key.algorithm,
        "tag": key.tag,
        "role": key.role,
        "publish": key.publish,
        "activate": key.activate,
        "retire": key.retire,
        "remove": key.remove,
        "private_pem": pem,
    }
    directory = key_dir(state_dir, key.zone)
    old = os.umask(0o077)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"K{key.zone.rstrip('.')}.+{key.algorithm:03d}+{key.tag:05d}.json"
        write_file(path, json.dumps(document, indent=1) + "\n", mode=0o600)
    finally:
        os.umask(old)
