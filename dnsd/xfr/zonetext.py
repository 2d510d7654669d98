"""Zones as RFC 1035 text and back: `dnsd export ZONE` and `dnsd import FILE`.

Export prints what an AXFR would carry — the SOA, the configured records, and every
load-balanced name as its current answer for a client with no location, under a comment
naming its load balancer. Import reads a master file (dnsd.config.zonefile) and writes
the equivalent YAML zone; exported load-balanced names come back as the plain records they
were exported as (their pools are not in a zone file), so `import` then `export` gives the
same records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import dns.name
import dns.rrset
import yaml

from dnsd.config.zonefile import FileRecord
from dnsd.xfr.content import ZoneContent

LB_MARK = "; load-balanced (lb: {lb}): the current answer for a client with no location"


def export_text(content: ZoneContent, lbs: dict[str, str], source: str) -> str:
    """The zone as a master file; `lbs` maps load-balanced owners to their LB's name."""
    origin = dns.name.from_text(content.name)
    lines = [
        f"; {content.name} exported by dnsd from {source}",
        f"$ORIGIN {content.name}",
        _rrset_text(content.soa, origin),
    ]
    lines += [_rrset_text(rrset, origin) for rrset in content.static]
    marked = None
    for rrset in content.answers:
        owner = rrset.name.to_text().lower()
        if owner != marked:
            lines.append(LB_MARK.format(lb=lbs.get(owner, "?")))
            marked = owner
        lines.append(_rrset_text(rrset, origin))
    return "\n".join(lines) + "\n"


def signed_text(name: str, soa: dns.rrset.RRset, rrsets: list[dns.rrset.RRset], source: str) -> str:
    """A signed zone as a master file (what AXFR sends for it)."""
    origin = dns.name.from_text(name)
    lines = [
        f"; {name} exported by dnsd from {source}, signed",
        f"$ORIGIN {name}",
        _rrset_text(soa, origin),
    ]
    lines += [_rrset_text(rrset, origin) for rrset in rrsets]
    return "\n".join(lines) + "\n"


def _rrset_text(rrset: dns.rrset.RRset, origin: dns.name.Name) -> str:
    return rrset.to_text(origin=origin, relativize=True)


def import_yaml(origin: str, records: Iterable[FileRecord], source: str) -> tuple[str, list[str]]:
    """The YAML zone for the records of a master file, and warnings (what YAML cannot
    say the same way: differing TTLs at one owner)."""
    records = list(records)
    warnings: list[str] = []
    ttls = Counter(r.ttl for r in records if r.rtype != "SOA")
    zone_ttl = ttls.most_common(1)[0][0] if ttls else 3600
    document: dict[str, object] = {"zone": origin.rstrip(".") or "."}
    document["ttl"] = zone_ttl
    soa = next((r for r in records if r.rtype == "SOA"), None)
    if soa is not None:
        mname, rname, serial, refresh, retry, expire, minimum = soa.text.split()
        document["soa"] = {
            "mname": mname,
            "rname": rname,
            "serial": int(serial),
            "refresh": int(refresh),
            "retry": int(retry),
            "expire": int(expire),
            "minimum": int(minimum),
            "ttl": soa.ttl,
        }
    owners: dict[str, dict[str, object]] = {}
    owner_ttls: dict[str, Counter[int]] = {}
    for record in records:
        if record.rtype == "SOA":
            continue
        key = _relative(record.owner, origin)
        node = owners.setdefault(key, {})
        values = node.setdefault(record.rtype, [])
        assert isinstance(values, list)
        values.append(record.text)
        owner_ttls.setdefault(key, Counter())[record.ttl] += 1
    for key, counts in owner_ttls.items():
        ttl = counts.most_common(1)[0][0]
        if len(counts) > 1:
            warnings.append(f"{key}: records have TTLs {sorted(counts)}; the YAML uses {ttl}")
        if ttl != zone_ttl:
            owners[key]["ttl"] = ttl
        for rtype, values in list(owners[key].items()):
            if isinstance(values, list) and len(values) == 1:
                owners[key][rtype] = values[0]
    document["records"] = owners
    header = f"# imported by dnsd from {source}\n"
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True), warnings


def _relative(owner: str, origin: str) -> str:
    if owner == origin:
        return "@"
    return owner[: -len(origin) - 1] if owner.endswith("." + origin) else owner


def origin_of(path: Path, text: str) -> str:
    """A master file's zone: its first $ORIGIN, else the file name without .zone/.db."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].upper() == "$ORIGIN":
            return parts[1] if parts[1].endswith(".") else parts[1] + "."
    name = path.name
    for suffix in (".zone", ".db"):
        name = name.removesuffix(suffix)
    return name.lower().rstrip(".") + "."
