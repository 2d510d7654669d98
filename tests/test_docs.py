"""Docs are tested: every ```yaml block in README.md is a complete config file that loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dnsd.config.loader import load_config

README = Path(__file__).parent.parent / "README.md"
BLOCKS = re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_yaml_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_yaml_example_validates(tmp_path: Path, index: int) -> None:
    (tmp_path / "example.yaml").write_text(BLOCKS[index])
    config, warnings = load_config(tmp_path)
    assert config.zones, "each README example is a whole zone file"
    assert not [w for w in warnings if "not used" not in w.message], warnings
