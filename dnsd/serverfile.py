"""The server file (`dnsd serve --config FILE`, interfaces.md "Additions"): a YAML mapping
with one key per `serve` flag, dashes as underscores (`listen: [...]`, `admin`,
`state_dir`, `rrl_rate`, `workers`, `redis`, `log_format`, …) and `dir` for the zone
directory. Flags given on the command line win over the file; the file wins over the
defaults. Values are checked by the flags' own parsers, and every problem is reported as
`file:line: key: message`, like the zone files.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dnsd.config.checker import Checker
from dnsd.config.files import UnsafeFile
from dnsd.config.yamlio import LineDict, LineList, YamlSyntaxError, load_yaml
from dnsd.errors import Reason

MAX_BYTES = 1 << 20
NOT_SETTINGS = frozenset({"help", "config", "follow_fd", "action"})


def settings(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The settings a server file may hold: every serve flag (and `dir`), by key."""
    return {a.dest: a for a in parser._actions if a.dest not in NOT_SETTINGS}


def read(path: Path, parser: argparse.ArgumentParser) -> tuple[dict[str, Any], list[Reason]]:
    """The settings in the file, converted as the flags would convert them, and the
    problems found (none: the settings are all usable)."""
    ck = Checker(str(path))
    try:
        if not path.is_file():
            raise UnsafeFile("not a regular file")
        if path.stat().st_size > MAX_BYTES:
            raise UnsafeFile(f"larger than {MAX_BYTES >> 20} MiB")
        doc = load_yaml(path.read_text(encoding="utf-8"))
    except YamlSyntaxError as exc:
        return {}, [Reason(str(path), exc.line, "", exc.message)]
    except (UnsafeFile, OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return {}, [Reason(str(path), 0, "", f"cannot read: {reason}")]
    if doc is None:
        return {}, []
    d = ck.mapping(doc, 1, "")
    if d is None:
        return {}, ck.reasons
    known = settings(parser)
    ck.keys(d, "", known)
    values: dict[str, Any] = {}
    for key, raw in d.items():
        action = known.get(str(key))
        if action is None:
            continue
        try:
            values[action.dest] = _convert(action, raw)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
            ck.error(d.line_of(key), str(key), str(exc) or "invalid value")
    return values, ck.reasons


def _convert(action: argparse.Action, raw: Any) -> Any:
    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(raw, bool):
            raise ValueError("expected true or false")
        return raw
    if isinstance(action, argparse._AppendAction):
        items = list(raw) if isinstance(raw, LineList | list) else [raw]
        return [_one(action, item) for item in items]
    if isinstance(raw, LineDict | LineList | list | dict) or raw is None:
        raise ValueError("expected a single value")
    return _one(action, raw)


def _one(action: argparse.Action, raw: Any) -> Any:
    if isinstance(raw, bool):
        raise ValueError("expected a value, not true/false")
    try:
        value = action.type(str(raw)) if callable(action.type) else str(raw)
    except ValueError:
        kinds = {int: "a whole number", float: "a number"}
        if action.type in kinds:
            raise ValueError(f"expected {kinds[action.type]}, got {raw!r}") from None
        raise
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"{value!r} is not one of {', '.join(map(str, action.choices))}")
    return value


def merge(args: argparse.Namespace, explicit: set[str], values: dict[str, Any]) -> dict[str, str]:
    """Apply the file's values under the flags given; returns where each setting came
    from: "flag", "file" or "default"."""
    sources = {}
    for dest in vars(args):
        if dest in explicit:
            sources[dest] = "flag"
        elif dest in values:
            setattr(args, dest, values[dest])
            sources[dest] = "file"
        else:
            sources[dest] = "default"
    return sources


def explicit_flags(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The settings given on the command line (parsed again with no defaults)."""
    saved = {a.dest: a.default for a in parser._actions}
    try:
        for action in parser._actions:
            action.default = argparse.SUPPRESS
        given, _ = parser.parse_known_args(argv)
    finally:
        for action in parser._actions:
            action.default = saved[action.dest]
    return set(vars(given))
