"""YAML loading that remembers where every key and list item came from.

Mappings load as `LineDict` and sequences as `LineList`; both record the line of each
key/item so validation can report `file:line: path: message`. Booleans follow YAML 1.2
(`true`/`false` only) so that `steering: off` stays the string "off", and sexagesimal
integers (`1:30` → 90) are not recognised, so unquoted IPv6-looking values stay strings.
Duplicate keys, which PyYAML silently overwrites, are recorded so they can be reported.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

BOOL_TAG = "tag:yaml.org,2002:bool"
INT_TAG = "tag:yaml.org,2002:int"


class LineDict(dict[Any, Any]):
    """A mapping with the line of each key (1-based) and of the mapping itself."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.line = 0
        self.key_lines: dict[Any, int] = {}
        self.duplicates: list[tuple[Any, int]] = []

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


class LineList(list[Any]):
    """A sequence with the line of each item (1-based) and of the sequence itself."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.line = 0
        self.item_lines: list[int] = []

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if 0 <= index < len(self.item_lines) else self.line


class _Loader(yaml.SafeLoader):
    pass


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (BOOL_TAG, INT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    INT_TAG, re.compile(r"^(?:[-+]?(?:0|[1-9][0-9_]*)|0x[0-9a-fA-F_]+)$"), list("-+0123456789")
)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    result = LineDict()
    result.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool) and key is not None:
            key = str(key)
        line = key_node.start_mark.line + 1
        if key in result.key_lines:
            result.duplicates.append((key, line))
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


class YamlSyntaxError(Exception):
    def __init__(self, line: int, message: str) -> None:
        self.line = line
        self.message = message
        super().__init__(f"{line}: {message}")


def load_yaml(text: str) -> Any:
    """Parse one YAML document; raise YamlSyntaxError with a line number on bad syntax."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise YamlSyntaxError(line, f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(0, f"YAML error: {exc}") from None
