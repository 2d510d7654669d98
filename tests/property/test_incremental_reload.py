"""A reload that re-parses only the changed files (ParseCache) and reuses unchanged zones'
trees gives exactly the snapshot a full load gives, over random sequences of edits —
including edits that break the config and edits that repair it."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnsd.config.loader import ParseCache
from dnsd.errors import ConfigError
from dnsd.loading import load_snapshot
from tests.tiers import examples

ZONE = """\
zone: inc.test
soa: {{mname: ns1.inc.test., rname: h.inc.test.}}
records:
  "@": {{NS: ns1.inc.test.}}
  ns1: {{A: 192.0.2.1}}
{records}
"""
POOLS = "pools:\n{pools}\nload_balancers:\n{lbs}\n"

edits = st.lists(
    st.tuples(
        st.sampled_from(["region", "ttl", "record", "lb-name", "break", "empty", "other-zone"]),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=6,
)


def texts(state: dict) -> dict[str, str]:
    records = (
        "\n".join(f"  r{i}: {{A: 192.0.2.{10 + i}}}" for i in range(state["records"]))
        + "\n"
        + "\n".join(f"  lb{i}: {{lb: w{i}}}" for i in range(4))
    )
    files = {"00-zone.yaml": ZONE.format(records=records)}
    for f in range(2):
        pools = "\n".join(
            f"  p{f}{i}: {{region: {state['regions'][f][i]}, backends: [{{name: a, address: 192.0.2.{50 + i}}}]}}"
            for i in range(2)
        )
        lbs = "\n".join(
            f"  w{2 * f + i}: {{ttl: {state['ttl'][2 * f + i]}, default_pools: [p{f}{i}]}}"
            for i in range(2)
        )
        files[f"{10 + f}-pools.yaml"] = POOLS.format(pools=pools, lbs=lbs)
    if state["broken"]:
        files["10-pools.yaml"] += "  oops: [\n"
    if state["empty"]:
        files["20-empty.yaml"] = ""
    if state["other"]:
        files["30-other.yaml"] = ZONE.replace("inc.test", "other.test").format(records="  x: {A: 192.0.2.99}")  # fmt: skip
    return files


def apply(state: dict, kind: str, n: int) -> None:
    if kind == "region":
        state["regions"][n % 2][n // 2] = ["WEU", "ENAM", "NEAS"][(["WEU", "ENAM", "NEAS"].index(state["regions"][n % 2][n // 2]) + 1) % 3]  # fmt: skip
    elif kind == "ttl":
        state["ttl"][n] += 1
    elif kind == "record":
        state["records"] = (state["records"] + n + 1) % 5
    elif kind == "break":
        state["broken"] = not state["broken"]
    elif kind == "empty":
        state["empty"] = not state["empty"]
    elif kind == "other-zone":
        state["other"] = not state["other"]


def load(directory: Path, cache: ParseCache | None, previous):  # type: ignore[no-untyped-def]
    try:
        return load_snapshot(directory, 1, previous=previous, cache=cache), None
    except ConfigError as exc:
        return None, [str(r) for r in exc.reasons]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits)
def test_incremental_reload_equals_a_full_load(sequence) -> None:
    state = {"regions": [["WEU", "ENAM"], ["NEAS", "WEU"]], "ttl": [30, 30, 30, 30],
             "records": 2, "broken": False, "empty": False, "other": False}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        cache = ParseCache()
        previous = None

        def write() -> None:
            wanted = texts(state)
            for path in directory.glob("*.yaml"):
                if path.name not in wanted:
                    path.unlink()
            for name, text in wanted.items():
                (directory / name).write_text(text)

        write()
        previous, _ = load(directory, cache, None)
        for kind, n in sequence:
            apply(state, kind, n)
            write()
            incremental, errors = load(directory, cache, previous)
            full, full_errors = load(directory, None, None)
            assert errors == full_errors
            if full is None:
                continue
            assert incremental is not None
            assert incremental.config == full.config
            assert dict(incremental.zones) == dict(full.zones)
            assert incremental.warnings == full.warnings
            previous = incremental
