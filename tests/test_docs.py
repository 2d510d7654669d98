"""Docs are tested: every ```yaml block in README.md and docs/ is a complete config file that
loads, and every relative link points at a file and heading that exist."""

from __future__ import annotations

import base64
import random
import re
import subprocess
import time
from pathlib import Path

import pytest

from dnsd.config.loader import load_config
from dnsd.drill.plan import load_plan
from dnsd.explain import explain_query, health_with_down
from dnsd.geo.database import GeoDatabase
from dnsd.loading import load_snapshot
from dnsd.snapshot import NodeSettings
from tests.geo_fixture import write_city_db

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
BLOCKS = [
    (page.relative_to(ROOT), block)
    for page in PAGES
    for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S)
]
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([\w-]+))?\)")


def test_readme_has_yaml_examples() -> None:
    assert len([page for page, _ in BLOCKS if page.name == "README.md"]) >= 1
    assert len(BLOCKS) >= 3


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_point_at_files_and_headings_that_exist(page: Path) -> None:
    for target, anchor in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        linked = (page.parent / target).resolve() if target else page
        assert linked.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: {target}#{anchor}"


# Clients of the README's geo example, placed as a City database places them: (country,
# subdivisions from the largest down) → the region docs/steering.md's split-countries table
# gives, and the pool the example answers with.
SPLIT_CLIENTS = {
    "85.214.0.0/24": (("DE", "BE"), "EEU", "eu"),  # Berlin
    "85.215.0.0/24": (("DE", "HH"), "EEU", "eu"),  # Hamburg
    "85.216.0.0/24": (("DE", "BY"), "WEU", "eu"),  # Munich
    "151.100.0.0/24": (("IT", ("62", "RM")), "EEU", "eu"),  # Rome: region Lazio, then province
    "2.44.0.0/24": (("IT", ("25", "VA")), "WEU", "eu"),  # Varese, Lombardy
    "95.24.0.0/24": (("RU", "MOW"), "EEU", "eu"),  # Moscow
    "95.25.0.0/24": (("RU", "NVS"), "SAS", "us"),  # Novosibirsk: SAS, not mapped in the example
    "177.0.0.0/24": (("BR", "CE"), "NSAM", "us"),  # Fortaleza
    "177.1.0.0/24": (("BR", "SP"), "SSAM", "us"),  # São Paulo
    "217.0.0.0/24": (("DE", None), "WEU", "eu"),  # Germany without a subdivision: the default
}


def test_readme_geo_example_sends_split_countries_where_the_docs_say(tmp_path: Path) -> None:
    geo = [text for page, text in BLOCKS if page.name == "README.md" and "steering: geo" in text]
    (tmp_path / "zones").mkdir()
    (tmp_path / "zones" / "shop.yaml").write_text(geo[0])
    db = write_city_db(
        tmp_path / "city.mmdb",
        {net: (c, sub, 50.0, 10.0) for net, ((c, sub), _, _) in SPLIT_CLIENTS.items()},
    )
    # the pipeline `dnsd explain --dir --geoip` runs (dnsd/cli.py), in-process: fast
    snap = load_snapshot(tmp_path / "zones", 1, GeoDatabase(str(db)), NodeSettings())
    health = health_with_down(snap.config, [])
    rows = (ROOT / "docs" / "steering.md").read_text().splitlines()
    for network, ((country, sub), region, pool) in SPLIT_CLIENTS.items():
        code = sub[0] if isinstance(sub, tuple) else sub
        name, default = SPLIT_ROWS[country]
        if code and region != default:  # the table names it in the other region's cell
            row = next(line for line in rows if line.startswith(f"| {name} `{country}`"))
            assert f"`{code}`" in row.split("**")[-1], (country, code, row)
        client = network.split("/")[0].removesuffix("0") + "1"
        info = explain_query(
            snap, health, "www.shop.example", "A", client, None, random.Random(1), time.time()
        )
        assert (info["country"], info["region"]) == (country, region), (network, sub, info)
        assert info["primary"] == pool, (network, info["primary"], info["pools"])  # trickle aside


SPLIT_ROWS = {"DE": ("Germany", "WEU"), "IT": ("Italy", "WEU"), "RU": ("Russia", "EEU"),
              "BR": ("Brazil", "SSAM")}  # fmt: skip


@pytest.mark.parametrize(
    "index", range(len(BLOCKS)), ids=[f"{p}-{i}" for i, (p, _) in enumerate(BLOCKS)]
)
def test_readme_yaml_example_validates(tmp_path: Path, index: int) -> None:
    text = BLOCKS[index][1]
    if re.search(r"^steps:", text, flags=re.M):  # a drill plan (docs/drills.md), not a config
        assert load_plan(text, "plan.yaml").steps
        return
    (tmp_path / "example.yaml").write_text(text)
    # Files an example names (a zone file, a TSIG secret) are made up for it.
    for name in re.findall(r"\bfile: (\S+\.zone)", text):
        zone = re.search(r"^zone: (\S+)", text, flags=re.M)
        assert zone, "a file: example names its zone"
        (tmp_path / name).write_text(
            f"$ORIGIN {zone.group(1)}.\n@ 300 IN SOA ns1 hostmaster 1 7200 900 1209600 300\n"
            "@ 300 IN NS ns1\nns1 300 IN A 192.0.2.53\n"
        )
    for name in re.findall(r"secret_file: (\S+?)[,}\s]", text):
        (tmp_path / name).write_text(base64.b64encode(bytes(range(32))).decode())
    config, warnings = load_config(tmp_path)
    assert config.zones, "each README example is a whole zone file"
    assert not [w for w in warnings if "not used" not in w.message], warnings


@pytest.mark.parametrize("plan", sorted((ROOT / "docs" / "drills").glob("*.yaml")), ids=str)
def test_the_ready_made_drill_plans_load(plan: Path) -> None:
    loaded = load_plan(plan.read_text(), str(plan))
    assert loaded.steps and all(s.expect for s in loaded.steps)


# -- the repository points only at what its users have -------------------------------------------
SOURCES = [
    path
    for folder in ("dnsd", "tests", "docs", "bench", "scripts", "docker")
    for path in sorted((ROOT / folder).rglob("*"))
    if path.suffix in {".py", ".c", ".pyi", ".md", ".html", ".js", ".yml", ".yaml", ".sh"}
    and path != Path(__file__).resolve()
] + [ROOT / "README.md"]
# Planning notes the users never get: the project's own docs are in docs/.
PRIVATE_NOTES = re.compile(
    r"shared/spe[c]|\bspec/|(?<![\w/-])(interfaces|config|conventions)\.md|§\d+(?:\.\d+)* of (?!RFC)"
)
ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? #?\d+|(?<![&\w])#\d+\b")
MD_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
JUNK = re.compile(
    r"\.(whl|zip|tar|gz|tgz|bz2|xz|so|pyd|dylib|egg)$|(^|/)(\.coverage|coverage\.xml)|"
    r"(^|/)(htmlcov|build|dist|[^/]+\.egg-info)/"
)


def test_no_build_output_archive_or_coverage_file_is_tracked() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(tracked) > 100
    junk = [name for name in tracked if JUNK.search(name)]
    assert not junk, f"tracked build output, archives or coverage: {junk}"


def test_nothing_points_at_notes_users_do_not_have() -> None:
    assert len(SOURCES) > 100
    for path in SOURCES:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{number}"
            assert not PRIVATE_NOTES.search(line), f"{where}: {line.strip()}"
            hit = ISSUE_NUMBER.search(line)
            # Say why, not which ticket: a ticket number means nothing to a reader.
            assert not hit or _hex_colour(line, hit), f"{where}: cites {hit and hit.group()}"


def _hex_colour(line: str, hit: re.Match[str]) -> bool:
    """`#333` or `#1f2937` in a style sheet is a colour, not a ticket."""
    token = re.match(r"#[0-9a-fA-F]+", line[hit.start() :])
    return hit.group().startswith("#") and token is not None and len(token.group()) in (4, 5, 7, 9)


def test_code_names_only_markdown_files_that_exist() -> None:
    """A page named in code or tests (`docs/steering.md`) is one a user has: a bare
    `docs/steering.md, trickle` pointed at a planning note, not at the manual."""
    for path in SOURCES:
        if path.suffix not in {".py", ".c", ".pyi"}:
            continue  # the pages' own links: test_relative_links_point_at_files_...
        for name in MD_PATH.findall(path.read_text(errors="replace")):
            assert (ROOT / name).exists() or (path.parent / name).exists(), (
                f"{path.relative_to(ROOT)} names {name}, which is not in the repository"
            )
