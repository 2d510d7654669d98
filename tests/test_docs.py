"""Docs are tested: every ```yaml block in README.md and docs/ is a complete config file that
loads, and every relative link points at a file and heading that exist."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from dnsd.config.loader import load_config
from dnsd.drill.plan import load_plan

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
