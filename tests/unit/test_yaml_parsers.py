"""libyaml's C parser and the pure-Python one read every test config the same: the same
values, the same line of every key and item, the same reasons from `dnsd check` — and both
keep the limits (depth, alias bombs, long scalars), the C one without overflowing its stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dnsd.config import yamlio
from dnsd.config.loader import check_directory
from dnsd.config.yamlio import (
    CSafeLoader,
    LineDict,
    LineList,
    YamlSyntaxError,
    load_yaml,
    parser_for,
)

ROOT = Path(__file__).parent.parent.parent
FILES = sorted({*ROOT.glob("zones/*.yaml"), *(ROOT / "tests" / "data").rglob("*.yaml")})
DIRECTORIES = sorted({p.parent for p in FILES})


def test_pyyaml_has_libyaml() -> None:
    assert CSafeLoader is not None  # PyYAML's wheels include it; the tests need both parsers


def shape(value: Any) -> Any:
    """A value with every line number in it, for comparison."""
    if isinstance(value, LineDict):
        return ("map", value.line, sorted(value.key_lines.items(), key=str), value.duplicates,
                {str(k): shape(v) for k, v in value.items()})  # fmt: skip
    if isinstance(value, LineList):
        return ("seq", value.line, value.item_lines, [shape(v) for v in value])
    return (type(value).__name__, value)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_both_parsers_give_the_same_values_and_lines(path: Path) -> None:
    text = path.read_text()
    assert parser_for(text) == "c"
    results = []
    for parser in ("c", "pure"):
        try:
            results.append(shape(load_yaml(text, parser)))
        except YamlSyntaxError as exc:
            results.append(("error", exc.line))
    assert results[0] == results[1]


@pytest.mark.parametrize(
    "directory", DIRECTORIES, ids=[str(d.relative_to(ROOT)) for d in DIRECTORIES]
)
def test_dnsd_check_says_the_same_with_either_parser(directory: Path, monkeypatch) -> None:
    with_c = [reason(r) for r in check_directory(directory)]
    monkeypatch.setattr(yamlio, "DEFAULT_PARSER", "pure")
    assert [reason(r) for r in check_directory(directory)] == with_c


def reason(r: Any) -> str:
    """A reason as `dnsd check` prints it; of a syntax error only where it is (the two
    parsers word the problem differently: "did not find expected ','" / "expected ','")."""
    text = str(r)
    return text.split(" YAML syntax error")[0] if "YAML syntax error" in text else text


BOMB = "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefg", "bcdefgh", strict=True)
)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[" * 100 + "]" * 100, "nested deeper than 64 levels"),
        ("[" * 30_000 + "]" * 30_000, "nested deeper than 64 levels"),  # C parser, deep stack
        ("[" * 300_000 + "]" * 300_000, "nested deeper than 64 levels"),  # too deep for it: pure
        (BOMB, "values once aliases are expanded"),
        ("a: " + "x" * 70_000, "longer than 65536 characters"),
    ],
)
def test_limits_hold_with_either_parser(text: str, words: str) -> None:
    for parser in ("c", "pure"):
        with pytest.raises(YamlSyntaxError, match=words):
            load_yaml(text, parser)
    assert parser_for("[" * 30_000) == "c" and parser_for("[" * 300_000) == "pure"


# Documents the direct builder (no anchors) and the general constructors must read alike:
# every scalar type, duplicates, merge and `=` keys, tagged collections, non-scalar keys,
# and several problems in one text (the limit is reported first, as when checked first).
ODD_DOCUMENTS = [
    "a: 1\nb: [x, 'y', 2, 3.5, ~, true, off, 1:30, 0x1F, 2001:db8::1, '']\n",
    "a: 1\na: 2\nb: {c: 1, c: 2}\n",
    "<<: {a: 1}\nb: 2\n",
    "=: 1\n",
    "1: a\n2.5: b\nnull: c\n~: d\ntrue: e\n",
    "x: !!set {a, b}\n",
    "x: !!binary aGVsbG8=\nd: 2002-12-14\n",
    "x: !!str 12\ny: !!int '12'\nz: !!map {a: 1}\nw: !!seq [1]\n",
    "x: !foo bar\n",
    "? [a]\n: 1\n",
    "? [a]\n: " + "[" * 70 + "]" * 70 + "\n",
    "x: " + "1" * 41 + "\n",
    "x: " + "1" * 41 + "\ny: " + "a" * 70_000 + "\n",
    "just a scalar\n",
    "- a\n- {b: c}\n- [1, 2]\n",
]


@pytest.mark.parametrize("text", ODD_DOCUMENTS)
def test_the_direct_builder_reads_like_the_constructors(text: str) -> None:
    results = []
    for parser in ("c", "pure"):
        try:
            results.append(shape(load_yaml(text, parser)))
        except YamlSyntaxError as exc:
            results.append(("error", exc.line, exc.message))
    assert results[0] == results[1]


def test_a_plain_document_skips_the_per_node_dispatch(monkeypatch) -> None:
    """Without anchors, strings, mappings, lists and integers are built in one walk of the
    node graph: PyYAML's general constructor runs only for the other scalars (here one
    float and one null), not once per node as before (most of the YAML time of
    `dnsd check` on a big configuration beyond libyaml's own)."""
    calls = []
    general = yaml.constructor.BaseConstructor.construct_object

    def counted(loader, node, deep=False):  # type: ignore[no-untyped-def]
        calls.append(node.tag)
        return general(loader, node, deep)

    monkeypatch.setattr(yaml.constructor.BaseConstructor, "construct_object", counted)
    text = "records:\n" + "".join(f"  s{i}: {{A: 10.0.0.{i}, ttl: 30}}\n" for i in range(200))
    doc = load_yaml(text + "w: 1.5\nn: ~\n", "c")
    assert doc["records"]["s7"] == {"A": "10.0.0.7", "ttl": 30}
    assert doc["records"].line_of("s7") == 9
    assert sorted(calls) == ["tag:yaml.org,2002:float", "tag:yaml.org,2002:null"]
