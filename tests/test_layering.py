"""The pure core does no I/O and reads no clock or global random (conventions.md rule 1)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "dnsd"
PURE = [
    "resolve.py",
    "reply.py",
    "zone_lookup.py",
    "snapshot.py",
    "steering",
    "config",
    "affinity.py",
    "geo/regions.py",
    "geo/locate.py",
    "health/fsm.py",
    "health/ewma.py",
    "health/view.py",
    "health/verdict.py",
    "ratelog.py",
]
FORBIDDEN = {"asyncio", "aiohttp", "socket", "time", "threading", "selectors"}
GLOBAL_RANDOM = re.compile(
    r"\brandom\.(random|choice|choices|shuffle|randint|randrange|uniform|sample)\("
)


def pure_files() -> list[Path]:
    files: list[Path] = []
    for entry in PURE:
        path = PACKAGE / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def imported_modules(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_pure_modules_import_no_io() -> None:
    files = pure_files()
    assert len(files) >= 10
    for path in files:
        source = path.read_text()
        bad = imported_modules(source) & FORBIDDEN
        assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"
        assert not GLOBAL_RANDOM.search(source), f"{path} uses the global random source"


def full_imports(path: Path) -> set[str]:
    """Every dnsd module `path` imports, also under TYPE_CHECKING and inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {name for name in names if name.startswith("dnsd")}


def test_admin_and_workers_do_not_import_the_server() -> None:
    """The server builds the admin app and the worker pool and passes what they need in
    (admin/control.py, callables): no import cycle between them, not even for types."""
    for path in [*sorted((PACKAGE / "admin").glob("*.py")), PACKAGE / "workers.py"]:
        imports = full_imports(path)
        assert "dnsd.server" not in imports, f"{path.relative_to(PACKAGE)} imports dnsd.server"
        if path.name == "workers.py":
            assert not any(i.startswith("dnsd.admin") for i in imports), imports


def test_no_module_imports_another_modules_private_names() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dnsd"):
                names = [a.name for a in node.names]
                private = [n for n in names if n.startswith("_") and not n.endswith("__")]
                assert not private, f"{path.relative_to(PACKAGE)} imports {private}"
