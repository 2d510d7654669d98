"""The property and fuzz tests run untraced by coverage (pytest-cov's `no_cover`): tracing
made their thousands of generated cases 2.3 times as slow, the biggest CPU cost of
`make test`. `make test`'s coverage report is of the other tests: a line only a generated
case reaches shows there as missed."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.no_cover)
