"""RFC 9432 catalog zones (version 2), made from the configuration (pure).

A zone with `catalog: {members: all | [ZONE, ...]}` gets its records here once every file
is read: the apex SOA (configured or CATALOG_SOA), `NS invalid.`, `version TXT "2"` and,
per member, `<id>.zones PTR <member>` with `group.<id>.zones TXT <catalog_group>` when the
member has one. Its serial and NOTIFY then follow from the content like any zone's
(dnsd.xfr.versions): a membership change is a content change.

The member id is a hash of the member's name, so it is the same after a restart, a reload
or on another node, and a consumer never sees a member leave and come back (RFC 9432 §5.4
treats a changed id as a reset of the member zone).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import dns.name

from dnsd.config.model import Config, RRset, Zone
from dnsd.dnsname import wire_length
from dnsd.errors import Reason
from dnsd.rdata import from_text, from_wire

CATALOG_VERSION = "2"
PTR, NS, TXT = 12, 2, 16
_SUFFIX_BYTES = 1 + 40 + 6 + 6  # "group." + 40 hex + ".zones" + ... under the catalog name


def member_id(zone: str) -> str:
    """The stable unique id (one label) of member `zone`: SHA-1 of its wire name, in hex."""
    wire = dns.name.from_text(zone).canonicalize().to_wire()
    assert wire is not None  # an absolute name always has a wire form
    return hashlib.sha1(wire, usedforsecurity=False).hexdigest()


def catalog_rrsets(catalog: Zone, members: list[Zone]) -> tuple[RRset, ...]:
    """The catalog zone's records but the SOA, for these members (in this order)."""
    origin, ttl = catalog.name, catalog.ttl
    version = from_wire(TXT, bytes([len(CATALOG_VERSION)]) + CATALOG_VERSION.encode())
    sets = [
        RRset(origin, NS, ttl, (from_text(NS, "invalid.", origin),)),
        RRset(f"version.{origin}", TXT, ttl, (version,)),
    ]
    for member in members:
        owner = f"{member_id(member.name)}.zones.{origin}"
        sets.append(RRset(owner, PTR, ttl, (from_text(PTR, member.name, origin),)))
        if member.catalog_group is not None:
            data = member.catalog_group.encode()
            group = from_wire(TXT, bytes([len(data)]) + data)
            sets.append(RRset(f"group.{owner}", TXT, ttl, (group,)))
    return tuple(sets)


def fill_catalogs(config: Config, reasons: list[Reason]) -> Config:
    """`config` with every catalog zone's records made from its members; a member that
    is not a zone here, is a catalog itself or has no `transfer:` is an error."""
    catalogs = [z for z in config.zones if z.catalog is not None]
    if not catalogs:
        return config
    by_name = {z.name: z for z in config.zones}
    filled: dict[str, Zone] = {}
    for zone in catalogs:
        assert zone.catalog is not None
        if wire_length(zone.name) + _SUFFIX_BYTES > 255:
            reasons.append(
                Reason(
                    zone.file,
                    0,
                    "zone",
                    "name too long for a catalog zone: its member names would pass 255 octets",
                )
            )
            continue
        names = zone.catalog.members
        if names is None:  # `all`: every other transferable zone but catalogs
            members = [z for z in config.zones if z.catalog is None and z.transfer is not None]
        else:
            members = []
            lines = zone.catalog.member_lines
            for i, name in enumerate(names):
                path, line = f"catalog.members[{i}]", lines[i] if i < len(lines) else 0
                member = by_name.get(name)
                if member is None:
                    problem = f"zone {name} is not defined"
                elif member.catalog is not None:
                    problem = f"zone {name} is a catalog zone: catalogs do not list catalogs"
                elif member.transfer is None:
                    problem = f"zone {name} has no transfer: section, so no secondary may pull it"
                else:
                    members.append(member)
                    continue
                reasons.append(Reason(zone.file, line, path, problem))
        members.sort(key=lambda z: z.name)  # the same records whatever the file order
        filled[zone.name] = replace(zone, rrsets=catalog_rrsets(zone, members))
    return replace(config, zones=tuple(filled.get(z.name, z) for z in config.zones))
