"""RFC 9432 catalog zones: the records dnsd makes for `catalog: {members: ...}`, the checks
on it, and the serial rise a membership change gives (what sends NOTIFY)."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import dns.name
import pytest

from dnsd.config.loader import check_directory, load_config
from dnsd.health.view import HealthView
from dnsd.loading import load_snapshot
from dnsd.rdata import to_text
from dnsd.xfr.versions import ZoneVersions

NOW = 1_800_000_000.0


def zone(name: str, transfer: bool = True, extra: str = "") -> str:
    text = (
        f"zone: {name}\nsoa: {{mname: ns.{name}, rname: h.{name}}}\n"
        f'records:\n  "@": {{NS: ns.{name}}}\n  ns: {{A: 192.0.2.1}}\n'
    )
    if transfer:
        text += "transfer: {allow: [127.0.0.0/8]}\n"
    return text + extra


CATALOG = "zone: catalog.example.\ncatalog: {members: all}\ntransfer: {allow: [127.0.0.0/8]}\n"


def members(value: str) -> str:
    return CATALOG.replace("members: all", f"members: {value}")


def write(directory: Path, **files: str) -> Path:
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / f"{name}.yaml").write_text(textwrap.dedent(text))
    return directory


def records(directory: Path) -> set[str]:
    config, _ = load_config(directory)
    catalog = next(z for z in config.zones if z.catalog is not None)
    return {
        f"{s.owner} {s.rtype} {to_text(s.rtype, rd)}" for s in catalog.rrsets for rd in s.rdatas
    }


def sha1_id(name: str) -> str:
    return hashlib.sha1(dns.name.from_text(name).to_wire()).hexdigest()


def test_all_lists_every_zone_with_transfer_with_stable_ids_and_groups(tmp_path: Path) -> None:
    directory = write(
        tmp_path / "z",
        a=zone("a.example.", extra="catalog_group: eu-primary\n"),
        b=zone("B.Example."),  # listed by its lower-case name, the id of that
        c=zone("c.example.", transfer=False),  # nobody may pull it: not a member
        catalog=CATALOG,
    )
    a, b = sha1_id("a.example."), sha1_id("b.example.")
    assert records(directory) == {
        "catalog.example. 2 invalid.",
        'version.catalog.example. 16 "2"',
        f"{a}.zones.catalog.example. 12 a.example.",
        f'group.{a}.zones.catalog.example. 16 "eu-primary"',
        f"{b}.zones.catalog.example. 12 b.example.",
    }
    # The same ids from another directory (another node, a restart): a hash of the name.
    other = write(tmp_path / "y", b=zone("b.example."), catalog=CATALOG)
    assert f"{b}.zones.catalog.example. 12 b.example." in records(other)


def test_a_list_of_members_is_served_as_listed(tmp_path: Path) -> None:
    directory = write(
        tmp_path / "z",
        a=zone("a.example."),
        b=zone("b.example."),
        catalog=CATALOG.replace("members: all", "members: [b.example]"),
    )
    ptrs = {r for r in records(directory) if " 12 " in r}
    assert ptrs == {f"{sha1_id('b.example.')}.zones.catalog.example. 12 b.example."}


@pytest.mark.parametrize(
    ("catalog", "expected"),
    [
        # ensure a catalog zone has no records of its own
        (CATALOG + 'records:\n  "@": {NS: ns.x.}\n', "catalog.yaml:4: records: a catalog zone has no records"),
        # ensure a member must be a zone of this directory
        (members("[a.example, nope.example]"),
         "catalog.yaml:2: catalog.members[1]: zone nope.example. is not defined"),
        # ensure a member must have transfer: (else no secondary may pull it)
        (members("[c.example]"),
         "catalog.members[0]: zone c.example. has no transfer: section"),
        # ensure a bad member name is a config error naming the item
        (members('["a..example"]'),
         "catalog.members[0]: invalid zone name 'a..example': empty label"),
        # ensure a member is listed once
        (members("[a.example, A.example.]"),
         "catalog.members[1]: zone a.example. is listed twice"),
        # ensure members is all or a list
        (members("some"), "catalog.members: expected all or a list of zone names"),
        # ensure catalogs do not list catalogs
        (members("[catalog.example]"), "is a catalog zone: catalogs do not list"),
        # ensure unknown keys in catalog: are refused
        (CATALOG.replace("{members: all}", "{members: all, member: x}"), "catalog.member: unknown key"),
    ],
)  # fmt: skip
def test_catalog_mistakes(tmp_path: Path, catalog: str, expected: str) -> None:
    directory = write(
        tmp_path, a=zone("a.example."), c=zone("c.example.", transfer=False), catalog=catalog
    )
    text = "\n".join(str(r) for r in check_directory(directory) if not r.warning)
    assert expected in text


def test_a_group_name_is_one_txt_string(tmp_path: Path) -> None:
    directory = write(tmp_path, a=zone("a.example.", extra=f"catalog_group: {'g' * 256}\n"))
    text = "\n".join(str(r) for r in check_directory(directory) if not r.warning)
    assert "a.yaml:7: catalog_group: expected a group name of 1 to 255 bytes" in text


def test_a_membership_change_raises_the_catalog_serial_and_tells_listeners(
    tmp_path: Path,
) -> None:
    directory = write(tmp_path / "z", a=zone("a.example."), catalog=CATALOG)
    versions = ZoneVersions(None)
    heard: list[tuple[str, int]] = []
    versions.listeners.append(lambda name, serial: heard.append((name, serial)))
    view = HealthView()
    first = versions.update(load_snapshot(directory, 1), view, NOW).zones["catalog.example."]
    again = versions.update(load_snapshot(directory, 2), view, NOW + 1).zones["catalog.example."]
    assert again.soa.rdata.times[0] == first.soa.rdata.times[0]  # nothing changed: same serial
    assert heard == []
    write(directory, b=zone("b.example."))  # a new zone with transfer: joins `all`
    snap = versions.update(load_snapshot(directory, 3), view, NOW + 2)
    serial = snap.zones["catalog.example."].soa.rdata.times[0]
    assert serial > first.soa.rdata.times[0]
    assert ("catalog.example.", serial) in heard
    served = versions.current("catalog.example.")
    assert served is not None
    assert (
        f"{sha1_id('b.example.')}.zones.catalog.example. 3600 IN PTR b.example." in served.texts()
    )
