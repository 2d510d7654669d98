"""The key records a signed zone serves at its apex: DNSKEY, and CDS/CDNSKEY for the parent
(RFC 7344), put into the snapshot when the keys are loaded or change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from dnslib import RD

from dnsd.config.model import RRset
from dnsd.snapshot import Node, Snapshot, WithApex, copied, with_rrset
from dnsd.zone_keys import ZoneKeys


def with_keys(snap: Snapshot, signing: Mapping[str, ZoneKeys]) -> Snapshot:
    """The snapshot signing its DNSSEC zones with `signing` (zone → keys): the apex of each
    serves the DNSKEY set and the CDS/CDNSKEY records for the parent (RFC 7344)."""
    zones = copied(snap.zones)
    for name, keys in signing.items():
        zone = zones.get(name)
        if zone is None:
            continue
        apex = zone.nodes[zone.name]
        sets: Mapping[int, RRset] = apex.rrsets
        for rrset in apex_key_rrsets(keys, zone.config.ttl).values():
            sets = with_rrset(sets, rrset)
        zones[name] = replace(zone, nodes=WithApex(zone.nodes, zone.name, Node(sets, apex.lb)))
    return replace(snap, zones=MappingProxyType(zones), signing=MappingProxyType(dict(signing)))


def apex_key_rrsets(keys: ZoneKeys, ttl: int) -> dict[int, RRset]:
    """DNSKEY, CDS and CDNSKEY at the apex as the lookup serves them (raw RDATA), at the
    zone's TTL (a key roll waits for it)."""
    dnskeys = keys.dnskey_rrset(ttl)
    out: dict[int, RRset] = {}
    for rtype, rdatas in (
        (48, list(dnskeys)),
        (60, [k.dnskey for k in keys.sep_keys()]),  # CDNSKEY (RFC 7344 §3.2)
        (59, [k.ds() for k in keys.sep_keys()]),  # CDS: the DS records to publish
    ):
        records = tuple(RD(rd.to_digestable()) for rd in rdatas)
        out[rtype] = RRset(keys.zone, rtype, dnskeys.ttl, records)
    return out
