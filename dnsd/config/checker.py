"""Typed field readers that collect errors instead of raising (one Checker per file).

Each `get_*` reads one key of a LineDict, reports a Reason with the key's line when the
value is missing or of the wrong shape, and returns a usable default so validation can go
on and report every problem in one run.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from typing import Any, TypeVar

from dnsd.config.yamlio import LineDict, LineList
from dnsd.errors import Reason

T = TypeVar("T")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
MISSING: Any = object()


def parse_duration(value: Any) -> float | None:
    """`500ms`, `5s`, `2m`, `1h` or a number of seconds → seconds; None if malformed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value >= 0 else None
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    return None


def type_name(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class Checker:
    def __init__(self, file: str) -> None:
        self.file = file
        self.reasons: list[Reason] = []

    # -- reporting -------------------------------------------------------------------------
    def error(self, line: int, path: str, message: str) -> None:
        self.reasons.append(Reason(self.file, line, path, message))

    def warn(self, line: int, path: str, message: str) -> None:
        self.reasons.append(Reason(self.file, line, path, message, warning=True))

    # -- structure -------------------------------------------------------------------------
    def mapping(self, value: Any, line: int, path: str) -> LineDict | None:
        if isinstance(value, LineDict):
            for key, dup_line in value.duplicates:
                self.error(dup_line, join(path, key), "duplicate key")
            return value
        self.error(line, path, f"expected a mapping, got {type_name(value)}")
        return None

    def keys(
        self, d: LineDict, path: str, allowed: Iterable[str], required: Iterable[str] = ()
    ) -> None:
        """Reject unknown keys (with a "did you mean" hint) and report missing ones."""
        allowed = list(allowed)
        for key in d:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
                extra = f' (did you mean "{hint[0]}"?)' if hint else ""
                self.error(d.line_of(key), join(path, key), f"unknown key{extra}")
        for key in required:
            if key not in d:
                self.error(d.line, path, f'missing required key "{key}"')

    # -- scalar readers --------------------------------------------------------------------
    def get_str(self, d: LineDict, key: str, path: str, default: Any = MISSING) -> Any:
        value = d.get(key, MISSING)
        if value is MISSING:
            return self._missing(d, key, path, default)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        self.error(d.line_of(key), join(path, key), f"expected a string, got {type_name(value)}")
        return None if default is MISSING else default

    def get_int(
        self,
        d: LineDict,
        key: str,
        path: str,
        default: Any = MISSING,
        lo: int | None = None,
        hi: int | None = None,
    ) -> Any:
        value = d.get(key, MISSING)
        if value is MISSING:
            return self._missing(d, key, path, default)
        if not isinstance(value, int) or isinstance(value, bool):
            self.error(
                d.line_of(key), join(path, key), f"expected a whole number, got {type_name(value)}"
            )
            return None if default is MISSING else default
        return self._range(d, key, path, value, lo, hi, default)

    def get_float(
        self,
        d: LineDict,
        key: str,
        path: str,
        default: Any = MISSING,
        lo: float | None = None,
        hi: float | None = None,
    ) -> Any:
        value = d.get(key, MISSING)
        if value is MISSING:
            return self._missing(d, key, path, default)
        if not isinstance(value, int | float) or isinstance(value, bool):
            self.error(
                d.line_of(key), join(path, key), f"expected a number, got {type_name(value)}"
            )
            return None if default is MISSING else default
        if not math.isfinite(value):  # .nan passes every range check; .inf breaks sums
            self.error(d.line_of(key), join(path, key), f"expected a finite number, got {value}")
            return None if default is MISSING else default
        return self._range(d, key, path, float(value), lo, hi, default)

    def get_duration(
        self, d: LineDict, key: str, path: str, default: Any = MISSING, lo: float = 0.0
    ) -> Any:
        value = d.get(key, MISSING)
        if value is MISSING:
            return self._missing(d, key, path, default)
        seconds = parse_duration(value)
        if seconds is None:
            self.error(
                d.line_of(key),
                join(path, key),
                f"expected a duration such as 500ms, 5s, 2m or a number of seconds, got {value!r}",
            )
            return None if default is MISSING else default
        return self._range(d, key, path, seconds, lo, None, default)

    def get_bool(self, d: LineDict, key: str, path: str, default: Any = MISSING) -> Any:
        value = d.get(key, MISSING)
        if value is MISSING:
            return self._missing(d, key, path, default)
        if isinstance(value, bool):
            return value
        self.error(d.line_of(key), join(path, key), f"expected true or false, got {value!r}")
        return None if default is MISSING else default

    def get_enum(
        self, d: LineDict, key: str, path: str, choices: Iterable[str], default: Any = MISSING
    ) -> Any:
        value = d.get(key, MISSING)
        if value is MISSING:
            return self._missing(d, key, path, default)
        choices = list(choices)
        if value is False and "off" in choices:
            return "off"  # YAML 1.1 habit: a bare `off` may arrive as false
        if isinstance(value, str) and value in choices:
            return choices[choices.index(value)]  # the constant: one string, not one per entry
        hint = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
        extra = f' (did you mean "{hint[0]}"?)' if hint else ""
        self.error(
            d.line_of(key),
            join(path, key),
            f"{value!r} is not one of {', '.join(choices)}{extra}",
        )
        return None if default is MISSING else default

    def get_str_list(self, d: LineDict, key: str, path: str, default: Any = MISSING) -> Any:
        """A list of strings; a single string is accepted as a list of one."""
        value = d.get(key, MISSING)
        if value is MISSING:
            return self._missing(d, key, path, default)
        return self.str_list(value, d.line_of(key), join(path, key))

    def str_list(self, value: Any, line: int, path: str) -> list[tuple[str, int]]:
        """Items with their lines; bad items are reported and left out."""
        if isinstance(value, str):
            return [(value, line)]
        if not isinstance(value, LineList):
            self.error(line, path, f"expected a list of strings, got {type_name(value)}")
            return []
        items = []
        for i, item in enumerate(value):
            if isinstance(item, str) and item:
                items.append((item, value.line_of(i)))
            else:
                self.error(
                    value.line_of(i), f"{path}[{i}]", f"expected a string, got {type_name(item)}"
                )
        return items

    # -- helpers ---------------------------------------------------------------------------
    def _missing(self, d: LineDict, key: str, path: str, default: Any) -> Any:
        if default is MISSING:
            self.error(d.line, path, f'missing required key "{key}"')
            return None
        return default

    def _range(
        self, d: LineDict, key: str, path: str, value: T, lo: Any, hi: Any, default: Any
    ) -> Any:
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            bounds = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
            self.error(d.line_of(key), join(path, key), f"must be {bounds}, got {value}")
            return None if default is MISSING else default
        return value


def join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)
