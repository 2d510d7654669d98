"""Imports point downward: health logic knows nothing of Redis, the cluster or the admin
API; the config history's rules are pure."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DNSD = Path(__file__).resolve().parents[2] / "dnsd"


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", sorted((DNSD / "health").glob("*.py")), ids=lambda p: p.name)
def test_health_imports_neither_the_cluster_nor_redis_nor_admin(path: Path) -> None:
    bad = {m for m in imports(path) if m.split(".")[0] == "redis"
           or m.startswith(("dnsd.cluster", "dnsd.admin"))}  # fmt: skip
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_the_config_history_rules_are_pure() -> None:
    used = imports(DNSD / "cluster" / "config_log.py")
    assert not {m for m in used if m.split(".")[0] in ("asyncio", "redis", "time", "socket")}
