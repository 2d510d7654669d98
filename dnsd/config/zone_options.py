"""The options of a zone beside its records: `transfer`, `update` grants, `dnssec`,
`notify` and a catalog member's `catalog_group` (docs/configuration.md)."""

from __future__ import annotations

import ipaddress

import dns.exception
import dns.rdatatype

from dnsd.config.checker import Checker
from dnsd.config.model import IPNetwork, Transfer, UpdateGrant
from dnsd.config.yamlio import LineDict, LineList
from dnsd.dnsname import parse_name
from dnsd.rdata import type_number, type_problem

MAX_GROUP = 255  # one TXT string (RFC 9432 §4.4.2)
DNSSEC_ALGORITHMS = (13, 15)  # ECDSAP256SHA256 (default), ED25519


def catalog_group(ck: Checker, doc: LineDict) -> str | None:
    """`catalog_group: NAME`: the group property catalogs give this zone (RFC 9432 §4.4.2)."""
    group = ck.get_str(doc, "catalog_group", "")
    if group is None:
        return None
    text = str(group)
    if not text or len(text.encode()) > MAX_GROUP:
        ck.error(
            doc.line_of("catalog_group"),
            "catalog_group",
            f"expected a group name of 1 to {MAX_GROUP} bytes",
        )
        return None
    return text


def transfer_section(ck: Checker, doc: LineDict) -> Transfer | None:
    d = ck.mapping(doc["transfer"], doc.line_of("transfer"), "transfer")
    if d is None:
        return None
    ck.keys(d, "transfer", ("allow", "keys"))
    allow: list[IPNetwork] = []
    for text, line in ck.str_list(d.get("allow", LineList()), d.line_of("allow"), "transfer.allow"):
        try:
            allow.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            ck.error(line, "transfer.allow", f"not a network: {text!r}")
    keys = [
        k for k, _ in ck.str_list(d.get("keys", LineList()), d.line_of("keys"), "transfer.keys")
    ]
    if not allow:
        ck.warn(d.line, "transfer.allow", "no network may transfer the zone")
    return Transfer(tuple(allow), tuple(keys))


# Never granted to an UPDATE: the SOA is dnsd's (its serial), DNSSEC records are the
# signer's or the parent's business (DS, RRSIG, NSEC, DNSKEY, NSEC3, NSEC3PARAM, CDS, CDNSKEY).
NOT_UPDATABLE = frozenset({6, 43, 46, 47, 48, 50, 51, 59, 60})


def update_grants(ck: Checker, doc: LineDict, origin: str) -> tuple[UpdateGrant, ...]:
    """`update: [{key, names, types}, ...]`: who may change which records by RFC 2136
    UPDATE. `names` are owners relative to the zone (`@` the apex, `*` one or more labels)."""
    raw = doc["update"]
    line = doc.line_of("update")
    if not isinstance(raw, LineList):
        ck.error(line, "update", "expected a list of grants {key, names, types}")
        return ()
    grants = []
    for i, item in enumerate(raw):
        path = f"update[{i}]"
        d = ck.mapping(item, raw.line_of(i), path)
        if d is None:
            continue
        ck.keys(d, path, ("key", "names", "types"))
        key = ck.get_str(d, "key", path)
        names = []
        for text, at in ck.str_list(
            d.get("names", LineList()), d.line_of("names"), f"{path}.names"
        ):
            pattern = name_pattern(text, origin)
            if pattern is None:
                ck.error(
                    at,
                    f"{path}.names",
                    f"not a name relative to the zone: {text!r} "
                    "(use @ for the apex, * for one or more labels)",
                )
            else:
                names.append(pattern)
        types = set()
        for text, at in ck.str_list(
            d.get("types", LineList()), d.line_of("types"), f"{path}.types"
        ):
            rtype = type_number(text.upper())
            problem = type_problem(rtype) if rtype is not None else "unknown type"
            if rtype is not None and not problem and rtype in NOT_UPDATABLE:
                problem = "the SOA and DNSSEC records are never changed by UPDATE"
            if rtype is None or problem:
                ck.error(at, f"{path}.types", f"{text!r} cannot be granted: {problem}")
            else:
                types.add(rtype)
        if not names:
            ck.error(d.line, f"{path}.names", "a grant needs at least one name")
        if not types:
            ck.error(d.line, f"{path}.types", "a grant needs at least one record type")
        if key is not None and names and types:
            grants.append(UpdateGrant(str(key), tuple(names), frozenset(types)))
    return tuple(grants)


def name_pattern(text: str, origin: str) -> tuple[str, ...] | None:
    """`_acme-challenge.*` → ("_acme-challenge", "*"); `@` → (); None when not a name."""
    text = text.strip().lower()
    if text == "@":
        return ()
    if text.endswith("."):  # an absolute name: only one under the zone
        if origin != "." and not text.endswith("." + origin):
            return None
        text = text[: -len(origin) - 1] if origin != "." else text[:-1]
    parts = tuple(text.split("."))
    if not text or any(not p or len(p) > 63 for p in parts):
        return None
    try:
        parse_name(".".join("x" if p == "*" else p for p in parts), origin)
    except dns.exception.DNSException:
        return None
    return parts


def dnssec_section(ck: Checker, doc: LineDict) -> tuple[int | None, bool]:
    """`dnssec: {algorithm: 13, split_keys: false}` (or `dnssec: {}`): sign the zone online
    (dnsd.dnssec) with one CSK, or a KSK and a ZSK."""
    d = ck.mapping(doc["dnssec"], doc.line_of("dnssec"), "dnssec")
    if d is None:
        return None, False
    ck.keys(d, "dnssec", ("algorithm", "split_keys"))
    algorithm = ck.get_int(d, "algorithm", "dnssec", default=13)
    split_keys = bool(ck.get_bool(d, "split_keys", "dnssec", default=False))
    if algorithm not in DNSSEC_ALGORITHMS:
        ck.error(d.line_of("algorithm"), "dnssec.algorithm", "13 (ECDSAP256SHA256) or 15 (ED25519)")
        return None, False
    return int(algorithm), split_keys


def notify_targets(ck: Checker, doc: LineDict) -> tuple[tuple[str, int], ...]:
    out = []
    for text, line in ck.str_list(doc["notify"], doc.line_of("notify"), "notify"):
        target = parse_host_port(text, 53)
        if target is None:
            ck.error(line, "notify", f"expected ADDRESS or ADDRESS:PORT, got {text!r}")
        else:
            out.append(target)
    return tuple(out)


def parse_host_port(text: str, default_port: int) -> tuple[str, int] | None:
    """`192.0.2.1`, `192.0.2.1:5301`, `2001:db8::1`, `[2001:db8::1]:5301` → (address, port)."""
    host, port = text.strip(), default_port
    if host.startswith("["):
        host, _, rest = host[1:].partition("]")
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                return None
            port = int(rest[1:])
    elif host.count(":") == 1:
        host, _, digits = host.partition(":")
        if not digits.isdigit():
            return None
        port = int(digits)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return (str(address), port) if 0 < port < 65536 else None
