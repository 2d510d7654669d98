"""`dnsd.octodns.DnsdProvider`: dnsd as an octoDNS source and target.

    providers:
      dnsd:
        class: dnsd.octodns.DnsdProvider
        url: http://127.0.0.1:8053      # the admin API (changes go through the config API)
        token: env/DNSD_ADMIN_TOKEN     # a token with the admin scope
        # or, without a server: directory: /etc/dnsd/zones
        soa: {rname: hostmaster.example.net.}   # for zones the sync creates (optional)

A sync is one change set (`POST /api/v1/config/changes`, or dnsd.provision straight into
the directory): checked as a whole, applied together or not at all. How records map onto
dnsd entries is in mapping.py and docs/octodns.md. A zone dnsd does not have is created
in the same change set (`zones/Z`: its own YAML file), its SOA from the `soa:` option and
defaults (dnsd.provision.edit.new_zone_settings).
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any, ClassVar

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
from octodns.provider import ProviderException, SupportsException
from octodns.provider.base import BaseProvider
from octodns.record import Record, Update
from octodns.record.rr import Rrset

from dnsd.octodns.mapping import (
    PREFIX,
    Entries,
    Unmappable,
    base_name,
    dynamic_entries,
    dynamic_record,
)
from dnsd.provision.directory import apply_to_directory, read_all
from dnsd.provision.edit import ChangeRefused, new_zone_settings, relative
from dnsd.provision.targets import SECTIONS, Change, parse_route

# Every octoDNS record type that is a DNS record type (not ALIAS or URLFWD): dnsd serves
# them all from their presentation form (docs/octodns.md).
TYPES = (
    "A",
    "AAAA",
    "CAA",
    "CNAME",
    "DNAME",
    "DS",
    "HTTPS",
    "LOC",
    "MX",
    "NAPTR",
    "NS",
    "OPENPGPKEY",
    "PTR",
    "SPF",
    "SRV",
    "SSHFP",
    "SVCB",
    "TLSA",
    "TXT",
    "URI",
)


class DnsdProvider(BaseProvider):
    SUPPORTS_GEO = False
    SUPPORTS_DYNAMIC = True
    SUPPORTS_POOL_VALUE_STATUS = False
    SUPPORTS_DYNAMIC_SUBNETS = False
    SUPPORTS_MULTIVALUE_PTR = True
    # dnsd is the zone's authoritative server: a source's apex NS set is synced (octoDNS's
    # default strict_supports refuses a zone with one otherwise); without one in the
    # source, the zone's own NS set stays as the YAML has it.
    SUPPORTS_ROOT_NS = True
    SUPPORTS: ClassVar[set[str]] = set(TYPES)

    def __init__(
        self,
        id: str,
        url: str | None = None,
        token: str | None = None,
        directory: str | None = None,
        timeout: float = 30.0,
        soa: dict[str, Any] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self.log = logging.getLogger(f"DnsdProvider[{id}]")
        super().__init__(id, *args, **kwargs)
        if (url is None) == (directory is None):
            raise ProviderException(f"{id}: give url (with token) or directory, not both")
        if url is not None and not token:
            raise ProviderException(f"{id}: url needs a token (a dnsd token with the admin scope)")
        self.url = url.rstrip("/") if url else None
        self.token = token
        self.directory = Path(directory) if directory else None
        self.timeout = timeout
        if soa is not None and not isinstance(soa, dict):
            raise ProviderException(f"{id}: soa: a mapping (mname, rname, refresh, ...)")
        try:  # unknown keys are refused now, not at the first sync that creates a zone
            new_zone_settings("check.", soa)
        except ValueError as exc:
            raise ProviderException(f"{id}: {exc}") from None
        self.soa = soa
        self._foreign: dict[str, dict[str, str]] = {}  # zone → name → a hand-written LB

    # -- talking to dnsd -------------------------------------------------------------------------
    def _config(self, zone: str) -> dict[str, Any]:
        if self.directory is not None:
            try:
                return read_all(self.directory)
            except ChangeRefused as exc:
                raise ProviderException(f"{self.id}: {exc}") from None
        # One zone, page by page (dnsd sends at most 10,000 record names a response).
        query = {"zone": zone, "offset": 0}
        config = self._request("GET", "/api/v1/config?" + urllib.parse.urlencode(query))
        while "next_offset" in config:
            query["offset"] = config["next_offset"]
            page = self._request("GET", "/api/v1/config?" + urllib.parse.urlencode(query))
            info = page["zones"].get(zone)
            if info is not None:
                config["zones"].setdefault(zone, info)["records"].update(info["records"])
            config = {**page, "zones": config["zones"]}
        return config

    def _send(self, changes: list[Change]) -> None:
        if self.directory is not None:
            try:
                apply_to_directory(self.directory, changes)
            except ChangeRefused as exc:
                raise ProviderException(
                    f"{self.id}: {exc}: " + "; ".join(exc.errors[:20])
                ) from None
            return
        body = {
            "changes": [
                {
                    "method": "DELETE" if c.body is None else "PUT",
                    "route": c.target.route,
                    **({} if c.body is None else {"body": c.body}),
                }
                for c in changes
            ]
        }
        self._request("POST", "/api/v1/config/changes", body)

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode())
        except urllib.error.HTTPError as exc:
            try:
                detail = json.loads(exc.read().decode())
            except ValueError:
                detail = {}
            errors = "; ".join(detail.get("errors", [])[:20])
            message = detail.get("error", exc.reason)
            raise ProviderException(
                f"{self.id}: {method} {path}: {exc.code} {message}. {errors}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ProviderException(f"{self.id}: {self.url} unreachable: {exc}") from None

    # -- source: dnsd → octoDNS ----------------------------------------------------------------
    def populate(self, zone: Any, target: bool = False, lenient: bool = False) -> bool:
        """Add dnsd's records of `zone` (False when dnsd has no such zone)."""
        name = zone.name.rstrip(".").lower()
        config = self._config(name)
        info = config["zones"].get(name)
        self._foreign[name] = {}
        if info is None:
            return False
        origin = name + "."
        for key, entry in info["records"].items():
            owner = relative(str(key), origin)
            rname = "" if owner == "@" else owner
            fqdn = f"{rname}.{origin}" if rname else origin
            if "lb" in entry:
                lb = str(entry["lb"])
                if not lb.startswith(PREFIX):
                    self._foreign[name][rname] = lb
                    self.log.warning(
                        "populate: %s is load balancer %r, not managed by octoDNS: left out",
                        fqdn,
                        lb,
                    )
                    continue
                rtype = lb.rsplit("~", 1)[1]
                data = dynamic_record(lb, config)
                if data is None:
                    self.log.warning(
                        "populate: %s: the entries of %r are incomplete: left out", fqdn, lb
                    )
                    continue
                zone.add_record(
                    Record.new(zone, rname, {"type": rtype, **data}, source=self, lenient=lenient),
                    lenient=lenient,
                )
                continue
            ttl = int(entry.get("ttl", info.get("ttl", 3600)))
            for rtype in TYPES:
                if rtype not in entry:
                    continue
                values = entry[rtype] if isinstance(entry[rtype], list) else [entry[rtype]]
                zone.add_record(
                    _static_record(zone, rname, fqdn, rtype, ttl, values, lenient), lenient=lenient
                )
        return True

    # -- target: plan ----------------------------------------------------------------------------
    def _process_desired_zone(self, desired: Any) -> Any:
        desired = super()._process_desired_zone(desired)
        by_name: dict[str, list[Any]] = defaultdict(list)
        for record in desired.records:
            by_name[record.name].append(record)
        for records in by_name.values():
            fqdn = records[0].fqdn
            dynamic = [r for r in records if getattr(r, "dynamic", None)]
            if dynamic and len(records) > 1:
                types = ", ".join(sorted(r._type for r in records))
                raise SupportsException(
                    f"{self.id}: {fqdn}: a dynamic record must be the only record of its name in dnsd (one load balancer answers the name); found {types}"
                )
            for record in dynamic:
                if record._type not in ("A", "AAAA"):
                    raise SupportsException(
                        f"{self.id}: {fqdn}: dynamic {record._type} records are not supported (A and AAAA are)"
                    )
                try:
                    self._dynamic(record)
                except Unmappable as exc:
                    raise SupportsException(f"{self.id}: {exc}") from None
            ttls = {r.ttl for r in records}
            if len(ttls) > 1:
                raise SupportsException(
                    f"{self.id}: {fqdn}: dnsd keeps one TTL per name; the records here have {sorted(ttls)}"
                )
        return desired

    def _process_existing_zone(self, existing: Any, desired: Any, **kwargs: Any) -> Any:
        foreign = self._foreign.get(desired.name.rstrip(".").lower(), {})
        for record in desired.records:
            if record.name in foreign:
                raise SupportsException(
                    f"{self.id}: {record.fqdn} is served by load balancer {foreign[record.name]!r}, which octoDNS does not manage: remove the record from one side"
                )
        return super()._process_existing_zone(existing, desired, **kwargs)

    def _extra_changes(self, existing: Any, desired: Any, changes: list[Any]) -> list[Any]:
        """A changed health check is a change too (octoDNS compares values, not checks)."""
        changed = {(c.record.name, c.record._type) for c in changes}
        current = {(r.name, r._type): r for r in existing.records}
        extra = []
        for record in desired.records:
            key = (record.name, record._type)
            was = current.get(key)
            dynamic = getattr(record, "dynamic", None)
            if (
                dynamic
                and was is not None
                and key not in changed
                and _check_of(record) != _check_of(was)
            ):
                extra.append(Update(was, record))
        return extra

    def _dynamic(self, record: Any) -> Entries:
        dynamic = record.dynamic
        pools = {pid: pool.data for pid, pool in dynamic.pools.items()}
        rules = [rule.data for rule in dynamic.rules]
        timing = dict(record.octodns.get("dnsd", {}).get("healthcheck", {}))
        return dynamic_entries(
            record.fqdn,
            record._type,
            record.ttl,
            [str(v) for v in record.values],
            pools,
            rules,
            _check_of(record)[0],
            timing,
        )

    # -- target: apply ---------------------------------------------------------------------------
    def _apply(self, plan: Any) -> None:
        desired = plan.desired
        zone = desired.name.rstrip(".").lower()
        config = self._config(zone)
        info = config["zones"].get(zone)
        by_name: dict[str, list[Any]] = defaultdict(list)
        for record in desired.records:
            by_name[record.name].append(record)
        changes: list[Change] = []
        if info is None:  # a new zone: its file first, then its records (one change set)
            root_ns = [r for r in by_name.get("", []) if r._type == "NS"]
            settings = new_zone_settings(
                zone, self.soa, _dnsd_values(root_ns[0]) if root_ns else None
            )
            changes.append(Change(parse_route(f"zones/{zone}"), settings))
            self.log.info("_apply: zone %s is new in dnsd: created with %s", zone, settings)
            info = {"records": {}}
        existing = {relative(str(k), zone + "."): v for k, v in info["records"].items()}
        keep: set[str] = set()  # entries the new state needs
        touched = {c.record.name for c in plan.changes}
        for rname in sorted(touched):
            key = rname or "@"
            old = existing.get(key, {})
            entry: dict[str, Any] = {}
            if not rname and "NS" in old:  # kept unless the source has a root NS (below)
                entry["NS"] = old["NS"]
                if "ttl" in old:
                    entry["ttl"] = old["ttl"]
            for record in by_name.get(rname, []):
                if getattr(record, "dynamic", None):
                    entries = self._dynamic(record)
                    entry = {"lb": base_name(record.fqdn, record._type)}
                    for section in SECTIONS.values():
                        for name, body in getattr(entries, section).items():
                            keep.add(f"{section}/{name}")
                            changes.append(Change(parse_route(f"{section}/{name}"), body))
                    continue
                entry[record._type] = _dnsd_values(record)
                entry["ttl"] = record.ttl
            route = parse_route(f"zones/{zone}/records/{key}")
            changes.append(Change(route, entry or None, missing_ok=True))
        # entries of dynamic records that are gone or changed shape
        for rname in touched:
            fqdn = f"{rname}.{zone}." if rname else f"{zone}."
            stems = tuple(base_name(fqdn, t) for t in ("A", "AAAA"))
            for section in SECTIONS.values():
                for name in config[section]:
                    if name.startswith(stems) and f"{section}/{name}" not in keep:
                        changes.append(
                            Change(parse_route(f"{section}/{name}"), None, missing_ok=True)
                        )
        self._send(changes)


LOC_DEFAULTS = ["1.00m", "10000.00m", "10.00m"]  # size, precisions (RFC 1876 §3)


def _check_of(record: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A dynamic record's health check as octoDNS resolves it, and dnsd's timing."""
    check = {
        "protocol": record.healthcheck_protocol,
        "host": record.healthcheck_host(),
        "path": record.healthcheck_path,
        "port": record.healthcheck_port,
    }
    return check, dict(record.octodns.get("dnsd", {}).get("healthcheck", {}))


def _dnsd_values(record: Any) -> list[str]:
    values = record.values if hasattr(record, "values") else [record.value]
    if record._type == "TXT":
        return [str(v).replace("\\;", ";") for v in values]
    return [v.to_rdata_text() if hasattr(v, "to_rdata_text") else str(v) for v in values]


def _static_record(
    zone: Any, rname: str, fqdn: str, rtype: str, ttl: int, values: list[Any], lenient: bool
) -> Any:
    if rtype == "TXT":
        texts = []
        for value in values:
            text = str(value)
            if text.lstrip().startswith('"'):  # zone-file style: "a" "b" → one value
                rdata = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.TXT, text)
                text = b"".join(rdata.strings).decode()  # type: ignore[attr-defined]
            texts.append(text.replace(";", "\\;"))
        return Record.new(
            zone, rname, {"type": "TXT", "ttl": ttl, "values": texts}, lenient=lenient
        )
    rdatas = []
    for value in values:
        rdata = dns.rdata.from_text(
            dns.rdataclass.IN,
            dns.rdatatype.from_text(rtype),
            str(value),
            origin=dns.name.from_text(zone.name),
            relativize=False,
        )
        text = rdata.to_text()
        if rtype == "LOC":  # octoDNS reads all 12 fields; dnspython leaves defaults out
            fields = text.split()
            text = " ".join(fields + LOC_DEFAULTS[len(fields) - 9 :])
        rdatas.append(text)
    return Record.from_rrsets(zone, [Rrset(fqdn, rtype, ttl, rdatas)], lenient=lenient)[0]
