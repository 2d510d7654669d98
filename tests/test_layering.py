"""The package's structure, held by tests: the pure core does no I/O and reads no clock or
global random, and every package or top-level module of dnsd/ imports only what its row
of the dependency table below allows — downwards through the layers, never in a cycle,
and no two of its files import each other."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "dnsd"
PURE = [
    "resolve.py",
    "reply.py",
    "query_view.py",
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


# The layers, bottom first. A unit (a package, or a module directly in dnsd/) may import
# units of its own layer or below, never above; within a layer the table decides.
LAYERS: list[tuple[str, list[str]]] = [
    # Leaf helpers: names, records, files, logs, the protocol pieces everything shares.
    ("base", ["dnsd", "_fastloop", "errors", "dnsname", "rdata", "atomic_files",
              "process_tools", "logsetup", "ratelog", "cookies", "cookie_key", "geo", "query_view",
              "reload_result", "reaper", "admin_url", "events", "clock", "derived"]),
    # The validated configuration, and the key material derived from it.
    ("config", ["config", "tsig_keyring", "zone_keys"]),
    # What a query is answered from: the compiled, immutable snapshot.
    ("model", ["snapshot"]),
    # Backend health: what the probes observed and the operator overrode (HealthView is
    # read by the steering below, so health sits under it).
    ("state", ["health"]),
    # Pure decisions over snapshot + health: which name, which backends, which reply.
    ("core", ["affinity", "steering", "zone_lookup", "reply", "request", "answer_table"]),
    # Features around the core: DNSSEC, zone transfers and TSIG.
    ("features", ["dnssec", "xfr"]),
    # The query path composes core and features: one packet in, one reply out.
    ("query", ["resolve", "fastpath", "lb_classes", "lb_shapes", "explain", "loading", "tally",
               "zone_tables"]),
    # Processes, sockets, HTTP and tools: everything that runs the above.
    # `serve`: the services `server` constructs and starts in order (listeners, reloading,
    # systemd, the key and loop watches, a worker's pipe, …), one module each.
    # `cluster` (the Redis bus, its health and config channels) applies shared config
    # changes through `provision`'s writer.
    ("outer", ["net", "workers", "admin", "provision", "cluster", "octodns", "serverfile",
               "serverfile_reload", "geoip_cli", "serve",
               "server", "drill", "lab", "cli", "__main__"]),
]  # fmt: skip
BASE = {"dnsd", "errors", "dnsname", "rdata", "atomic_files", "process_tools", "logsetup",
        "ratelog", "reload_result", "reaper", "clock"}  # fmt: skip
# unit -> the units it may import (beyond itself).
ALLOWED: dict[str, set[str]] = {
    "dnsd": set(),
    "_fastloop": set(),
    "errors": set(),
    "dnsname": set(),
    "rdata": {"dnsname"},
    "atomic_files": set(),
    "process_tools": set(),
    "logsetup": set(),
    "ratelog": set(),
    "reload_result": set(),
    "reaper": set(),
    "admin_url": set(),
    "events": set(),
    "clock": set(),
    "derived": set(),
    "cookies": {"dnsname"},
    "cookie_key": {"atomic_files"},
    "geo": set(),
    "query_view": {"dnsname", "cookies", "geo"},
    "config": {"errors", "dnsname", "rdata", "atomic_files", "process_tools", "reaper", "geo"},
    "tsig_keyring": {"config"},
    "zone_keys": set(),
    "snapshot": {"config", "errors", "dnsname", "rdata", "geo", "cookies", "tsig_keyring",
                 "zone_keys", "derived"},
    "health": {"clock", "config", "snapshot", "ratelog", "atomic_files", "errors", "events"},
    "affinity": {"config", "health"},
    "steering": {"config", "geo", "rdata", "snapshot", "health", "affinity"},
    "zone_lookup": {"config", "dnsname", "rdata", "snapshot"},
    "reply": {"dnsname", "cookies", "geo", "query_view", "rdata", "steering", "zone_lookup"},
    "request": {"snapshot", "health", "reply"},
    "answer_table": {"steering"},
    "dnssec": {"config", "dnsname", "rdata", "atomic_files", "zone_keys", "snapshot", "zone_lookup"},
    "xfr": {"clock", "config", "dnsname", "reaper", "rdata", "geo", "ratelog", "atomic_files", "tsig_keyring",
            "zone_keys", "snapshot", "health", "steering", "reply", "dnssec", "derived"},
    # The cluster bus shares health observations between nodes: health's data types, the
    # config, files and logs; never the admin API or the server that wires it.
    "cluster": {*BASE, "config", "snapshot", "health", "events", "provision"},
    "resolve": {"ratelog", "cookies", "query_view", "request", "snapshot", "health", "steering", "reply",
                "zone_lookup", "dnssec", "xfr"},
    "fastpath": {"_fastloop", "answer_table", "config", "cookies", "dnsname", "geo", "query_view", "request", "snapshot", "health", "steering",
                 "reply", "zone_lookup", "dnssec", "resolve", "zone_tables", "lb_classes", "tally"},
    "loading": {"config", "dnssec", "errors", "geo", "process_tools", "snapshot", "xfr",
                "zone_keys", "zone_tables", "lb_classes"},
    "lb_classes": {"answer_table", "dnsname", "health", "lb_shapes", "reply", "snapshot", "steering", "xfr",
                   "zone_tables"},
    "lb_shapes": {"config", "health"},
    "tally": {"dnsname"},
    "zone_tables": {"dnsname", "rdata", "reply", "snapshot", "tally", "zone_lookup"},
    "explain": {"config", "geo", "rdata", "snapshot", "health", "reply", "request", "resolve"},
    "net": {"_fastloop", "answer_table", "ratelog", "cookies", "dnsname", "query_view", "reply", "xfr", "fastpath"},
    "workers": {"health"},
    "admin": {"dnsd", "events", "dnsname", "tally", "reaper", "config", "geo", "ratelog", "reload_result", "snapshot", "health",
              "steering", "xfr", "explain", "provision"},
    "provision": {"errors", "config", "atomic_files", "process_tools", "reload_result",
                  "health"},
    "octodns": {"config", "geo", "provision"},
    "serverfile": {"errors", "config", "admin"},
    "serverfile_reload": {"errors", "admin", "serverfile"},
    "geoip_cli": {"errors", "geo", "snapshot", "steering", "loading"},
    # The services the server is made of: each one job, none wires the others together.
    "serve": {"dnsd", "clock", "errors", "process_tools", "ratelog", "reaper", "reload_result",
              "rdata",
              "events", "serverfile_reload", "config", "geo", "loading", "snapshot", "health",
              "reply", "request", "dnssec", "xfr", "resolve", "fastpath", "net", "workers",
              "admin", "provision", "cluster", "steering", "atomic_files"},
    "server": {"process_tools", "reload_result", "events", "serverfile_reload", "config",
               "snapshot", "health", "xfr", "fastpath", "net", "workers", "admin", "provision",
               "cluster", "serve"},
    "drill": {"admin_url", "loading", "errors", "config", "geo", "logsetup", "snapshot", "health", "explain",
              "admin", "server"},
    "lab": {"drill"},
    "cli": {*BASE, "admin_url", "loading", "geoip_cli", "serverfile_reload", "config", "cookie_key", "cookies", "geo", "zone_keys", "snapshot",
            "health", "dnssec", "xfr", "cluster", "explain", "net", "admin", "serverfile",
            "serve", "server", "drill", "lab", "octodns", "provision"},
    "__main__": {"cli"},
}  # fmt: skip
LAYER_OF = {unit: index for index, (_, units) in enumerate(LAYERS) for unit in units}


def unit_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return "dnsd" if parts == ("__init__.py",) else parts[0].removesuffix(".py")


def units_imported(path: Path) -> set[str]:
    """The dnsd units `path` imports, under TYPE_CHECKING and inside functions too."""
    found: set[str] = set()
    for name in full_imports(path):
        parts = name.split(".")
        found.add(parts[1] if len(parts) > 1 else "dnsd")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "dnsd" and node.level == 0:
            found.discard("dnsd")  # `from dnsd import x`: x is a unit, or a root name
            found.update(a.name if a.name in LAYER_OF else "dnsd" for a in node.names)
        assert not (isinstance(node, ast.ImportFrom) and node.level), f"{path}: relative import"
    return found


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = unit_of(path)
        graph.setdefault(unit, set()).update(units_imported(path) - {unit})
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle in `graph`, as the path that closes it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_every_unit_has_a_layer_and_a_row() -> None:
    units = set(unit_graph()) | {"_fastloop"}
    assert units <= set(LAYER_OF), f"no layer for {sorted(units - set(LAYER_OF))}"
    assert set(ALLOWED) == set(LAYER_OF), set(ALLOWED) ^ set(LAYER_OF)
    assert len(LAYER_OF) == sum(len(units) for _, units in LAYERS), "a unit in two layers"


def test_the_table_only_allows_imports_down_the_layers() -> None:
    for unit, allowed in ALLOWED.items():
        up = sorted(a for a in allowed if LAYER_OF[a] > LAYER_OF[unit])
        assert not up, f"{unit} ({LAYERS[LAYER_OF[unit]][0]}) may not import {up}: above it"
    assert cycle(ALLOWED) is None, f"the table allows a cycle: {cycle(ALLOWED)}"


def test_every_import_is_allowed_by_the_table() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = unit_of(path)
        bad = sorted(units_imported(path) - {unit} - ALLOWED[unit])
        assert not bad, f"{path.relative_to(PACKAGE)} ({unit}) imports {bad}"


def test_no_import_cycle_between_units() -> None:
    graph = unit_graph()
    assert cycle(graph) is None, f"import cycle: {' -> '.join(cycle(graph) or [])}"
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def module_of(path: Path) -> str:
    """`dnsd/a/b.py` -> "dnsd.a.b"; a package's `__init__.py` is the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph() -> dict[str, set[str]]:
    """Which dnsd modules (files) each one imports: every import statement, also under
    TYPE_CHECKING and inside functions. `from dnsd.a import b` is the module `dnsd.a.b`
    when that is a file, else `dnsd.a`; the parent packages an import runs implicitly
    (`dnsd/a/__init__.py` for `import dnsd.a.b`) are not counted."""
    paths = {module_of(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in paths)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    if name in paths:
                        found.add(name)
                    elif node.module in paths:
                        found.add(node.module)
        graph[module] = found - {module}
    return graph


def test_no_import_cycle_between_modules() -> None:
    """Not only between units: no two files of dnsd/ import each other, directly or round
    a longer circle, not even for types (what both need lives below both)."""
    graph = module_graph()
    assert "dnsd.steering.records" in graph["dnsd.steering.decision"], "the graph sees imports"
    assert cycle(graph) is None, f"import cycle: {' -> '.join(cycle(graph) or [])}"


def test_only_the_config_reads_the_lb_prefix() -> None:
    """A pool reference names a pool or, with `lb:`, a nested load balancer; outside
    dnsd/config/ it is read with `config.pool_refs` (nested_lb, names_lb), never split by
    hand."""
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE)
        if where.parts[0] == "config":
            continue
        text = path.read_text()
        assert '"lb:"' not in text and "LB_PREFIX" not in text, f"{where} reads the lb: prefix"


def test_the_snapshot_imports_no_feature_and_no_outer_unit() -> None:
    features = {
        u for name, units in LAYERS if name in ("features", "query", "outer") for u in units
    }
    assert not unit_graph()["snapshot"] & features


def test_the_manual_shows_the_same_layers() -> None:
    """docs/development.md's layer table names the units of each layer this test enforces."""
    text = PACKAGE.parent.joinpath("docs/development.md").read_text()
    shown = {
        row[0]: set(re.findall(r"`([\w.]+)`", row[1]))
        for row in (line.strip("|").split("|")[:2] for line in text.splitlines())
        if len(row) == 2 and row[0].strip() in {name for name, _ in LAYERS}
        for row in [[row[0].strip(), row[1]]]
    }
    for name, units in LAYERS:
        assert shown.get(name) == set(units) - {"dnsd", "__main__"}, name


def _module_level_caches(path: Path, root: Path = PACKAGE) -> list[str]:
    """Names a module binds at its top level to an empty container it fills as it runs (a
    dict, a list, an OrderedDict or a weak mapping; or a list of Nones to fill in)."""
    empty_calls = {"dict", "list", "OrderedDict", "WeakKeyDictionary", "WeakValueDictionary"}
    found: list[str] = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        empty = (
            (isinstance(value, ast.Dict) and not value.keys)
            or (
                isinstance(value, ast.List)
                and all(isinstance(e, ast.Constant) and e.value is None for e in value.elts)
            )
            or (
                isinstance(value, ast.Call)
                and not value.args
                and (getattr(value.func, "id", None) or getattr(value.func, "attr", None))
                in empty_calls
            )
        )
        if empty:
            found.append(f"{path.relative_to(root)}:{target.id}")
    return found


def test_derived_data_hangs_off_what_it_is_derived_from() -> None:
    """What is made from a snapshot or a compiled zone is kept on it (`derived`), not in
    module-level caches keyed by object identity: at most 4 module-level caches in dnsd/."""
    caches = [name for path in sorted(PACKAGE.rglob("*.py")) for name in _module_level_caches(path)]
    assert len(caches) <= 4, caches


def test_the_cache_counter_sees_a_cache(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("A: dict[int, str] = {}\nB = [None, None]\nC = OrderedDict()\nD = {1: 2}\n")
    assert [n.rsplit(":", 1)[1] for n in _module_level_caches(source, tmp_path)] == [
        "A",
        "B",
        "C",
    ]


VIEW_DIFF = re.compile(r"\.(backends|pool_overrides|trickle_overrides)\.keys\(\) [|&-]")
NESTED_REF = re.compile(r"\b(nested_lb|names_lb|pool_ref)\(")


def test_one_definition_of_what_a_health_change_reaches() -> None:
    """What moved between two health views is worked out in dnsd/health/view.py only (and
    published with the view); which load balancers that reaches is `LbGraph.reached` only:
    nothing else reads the graph's reverse indexes or walks nested load balancers' pools to
    find what one reaches (steering walks them to decide, not to find reach)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE))
        tree = ast.parse(path.read_text())
        if where != "health/view.py":
            assert not VIEW_DIFF.search(path.read_text()), f"{where} diffs health views"
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = ast.unparse(func)
            if where != "config/lb_graph.py":
                assert not re.search(r"\.by_(pool|lb)\b", body), f"{where}: {func.name}"
            if where.split("/")[0] not in ("config", "steering"):
                walks = ".pool_refs()" in body and NESTED_REF.search(body)
                assert not walks, f"{where}: {func.name} walks what a load balancer reaches"
