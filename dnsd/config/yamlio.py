"""YAML loading that remembers where every key and list item came from.

Mappings load as `LineDict` and sequences as `LineList`; both record the line of each
key/item so validation can report `file:line: path: message`. Booleans follow YAML 1.2
(`true`/`false` only) so that `steering: off` stays the string "off", and sexagesimal
integers (`1:30` → 90) are not recognised, so unquoted IPv6-looking values stay strings.
Duplicate keys, which PyYAML silently overwrites, are recorded so they can be reported.

Config files cross a trust boundary (a reload reads whatever is in the directory), so the
loader is bounded: nesting depth, the size of the document with every alias expanded
(an alias bomb fails after a few thousand steps, not gigabytes), scalar length, digits of
an integer; mapping keys must be scalars. Each limit fails as a YAML error with a line.

Two parsers, one result: libyaml's C parser (`CSafeLoader`, about 5× faster on a big
zone) when PyYAML was built with it, else the pure-Python one. The constructors and
resolvers above are shared, so values and line numbers are the same (a test loads every
test config both ways). libyaml composes recursively in C and would overflow the stack on
a document nested a few ten thousand levels deep; the C parser therefore runs in a thread
whose stack fits the deepest nesting the text could hold (each `[` or `{` one level, plus
two per column of the longest line), and a text that would need more than 256 MiB of stack
is read by the pure parser, which stops at 64 levels. The limits are then checked on the
composed nodes before anything is constructed. A text without anchors (no aliases: each
node used once) is built straight from libyaml's events (`_build_from_events`), without
the node graph; whatever that walk does not take (a tag, a merge key, a limit, an error)
is read again through the node graph, so values, lines and the first error are the same.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from dnsd.process_tools import call_with_stack

BOOL_TAG = "tag:yaml.org,2002:bool"
INT_TAG = "tag:yaml.org,2002:int"


class LineDict(dict[Any, Any]):
    """A mapping with the line of each key (1-based) and of the mapping itself. Slots, and
    a list of duplicates only once there is one: a config holds one per record (a 1-key
    mapping cost 790 bytes, 450 now), all of it freed once the file is checked."""

    __slots__ = ("duplicates", "key_lines", "line")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.line = 0
        self.key_lines: dict[Any, int] = {}
        self.duplicates: list[tuple[Any, int]] | tuple[()] = ()

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


def _duplicate(mapping: LineDict, key: Any, line: int) -> None:
    if not mapping.duplicates:
        mapping.duplicates = []
    mapping.duplicates.append((key, line))


class LineList(list[Any]):
    """A sequence with the line of each item (1-based) and of the sequence itself."""

    __slots__ = ("item_lines", "line")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.line = 0
        self.item_lines: list[int] = []

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if 0 <= index < len(self.item_lines) else self.line


MAX_DEPTH = 64  # nested mappings/sequences
MAX_NODES = 2_000_000  # nodes of the document with every alias expanded
MAX_SCALAR = 65_536  # characters in one scalar
MAX_INT_DIGITS = 40


class _Loader(yaml.SafeLoader):
    """SafeLoader with the limits above, checked while the document is composed."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._weight: dict[int, int] = {}  # id(node) → its size with aliases expanded

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.ScalarEvent):
            event = self.peek_event()
            if len(event.value) > MAX_SCALAR:
                raise _limit(event, f"a value longer than {MAX_SCALAR} characters")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _limit(self.peek_event(), f"nested deeper than {MAX_DEPTH} levels")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        weight = self._weight.get(id(node))
        if weight is None:  # a new node (an alias returns one already weighed)
            if isinstance(node, yaml.MappingNode):
                children = [n for pair in node.value for n in pair]
            elif isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            else:
                children = []
            weight = 1 + sum(self._weight.get(id(child), 1) for child in children)
            self._weight[id(node)] = weight
            if weight > MAX_NODES:
                raise _limit(node, f"more than {MAX_NODES} values once aliases are expanded")
        return node


def _limit(where: Any, what: str) -> yaml.MarkedYAMLError:
    return yaml.constructor.ConstructorError(None, None, f"too large: {what}", where.start_mark)


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    if len(node.value) > MAX_INT_DIGITS:
        raise _limit(node, f"an integer of more than {MAX_INT_DIGITS} digits")
    return int(yaml.SafeLoader.construct_yaml_int(loader, node))


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
        if not isinstance(key_node, yaml.ScalarNode):
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            )
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in result.key_lines:
            _duplicate(result, key, line)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


def _construct_str(loader: _Loader, node: yaml.ScalarNode) -> str:
    """A copy of the scalar's text, not the node's own string: the node graph is freed
    once the document is built, and strings kept from it would stay scattered across the
    memory it used, holding it (measured on the 10k-LB config: 32 MiB less resident after
    a load). One-character strings are shared by Python anyway."""
    value: str = node.value
    if len(value) < 2:
        return value
    return value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
_Loader.add_constructor(INT_TAG, _construct_int)


class YamlSyntaxError(Exception):
    def __init__(self, line: int, message: str) -> None:
        self.line = line
        self.message = message
        super().__init__(f"{line}: {message}")


CSafeLoader: Any = getattr(yaml, "CSafeLoader", None) if yaml.__with_libyaml__ else None
STACK_PER_LEVEL = 1024  # bytes; libyaml's composer was measured using about 280 per level
MAX_STACK = 256 << 20


def _check_nodes(root: yaml.Node, aliases: bool) -> None:
    """The pure loader's limits, on a composed node graph, without recursion. Without
    anchors in the text there are no aliases: a level-by-level walk checks depth and
    scalar length; with them, each node is weighed once (an alias is the same node)."""
    if aliases:
        _check_weighed(root)
        return
    level, depth = [root], 1
    while level:
        if depth > MAX_DEPTH:
            raise _limit(level[0], f"nested deeper than {MAX_DEPTH} levels")
        below: list[yaml.Node] = []
        for node in level:
            if isinstance(node, yaml.ScalarNode):
                if len(node.value) > MAX_SCALAR:
                    raise _limit(node, f"a value longer than {MAX_SCALAR} characters")
            elif isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    below.append(key)
                    below.append(value)
            else:
                below.extend(node.value)
        level, depth = below, depth + 1


def _check_weighed(root: yaml.Node) -> None:
    weight: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if depth > MAX_DEPTH:
            raise _limit(node, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            if len(node.value) > MAX_SCALAR:
                raise _limit(node, f"a value longer than {MAX_SCALAR} characters")
            weight[id(node)] = 1
            continue
        children = (
            [n for pair in node.value for n in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        if not done:
            if id(node) in weight:
                continue
            weight[id(node)] = 0  # being weighed
            stack.append((node, depth, True))
            stack.extend((child, depth + 1, False) for child in children if id(child) not in weight)
            continue
        total = 1 + sum(weight.get(id(child), 1) for child in children)
        if total > MAX_NODES:
            raise _limit(node, f"more than {MAX_NODES} values once aliases are expanded")
        weight[id(node)] = total


if CSafeLoader is not None:

    class _CLoader(CSafeLoader):
        """libyaml's parser with _Loader's resolvers and constructors."""

        yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers
        yaml_constructors = _Loader.yaml_constructors

        events = True  # build a text without anchors from the parser's events

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.text = stream
            self.aliases = "&" in stream  # no anchor, no alias

        def get_single_data(self) -> Any:
            if self.events and not self.aliases:
                try:
                    return _build_from_events(self)
                except Exception:
                    pass  # anything unusual, any error: the node graph, as before
                again = _CGraphLoader(self.text)
                try:
                    return again.get_single_data()
                finally:
                    again.dispose()
            node = self.get_single_node()
            if node is None:
                return None
            _check_nodes(node, self.aliases)
            return self.construct_document(node)

    class _CGraphLoader(_CLoader):
        """The same, from the composed node graph."""

        events = False


class _Unusual(Exception):
    """The document holds something `_build_from_events` leaves to the constructors."""


class _OverLimit(Exception):
    """`_build_from_events` met a limit; `_check_nodes` says which, in its own words."""


STR_TAG = "tag:yaml.org,2002:str"
MAP_TAG = yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG
SEQ_TAG = yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG
_KEY_TAGS_FLATTENED = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")
_new_dict = LineDict.__new__
_new_list = LineList.__new__


def _build_from_events(loader: Any) -> Any:
    """The document a text without anchors makes (what `_check_nodes` then
    `construct_document` give: the same values, lines and duplicates), built from the
    parser's events as they come, in one walk without PyYAML's per-node dispatch and
    without the node graph libyaml would compose first (nodes and two marks per value: a
    big configuration's load peaked at 266 MiB for the 43 it keeps, now 165). A merge
    key, a tagged collection, any limit met and any error raise: the caller reads the
    text again through the node graph and the constructors, which say it as before."""
    try:
        loader.get_event()  # the stream's start
        if loader.check_event(yaml.StreamEndEvent):
            return None
        loader.get_event()  # the document's start
        value = _from_events(loader, 1)
        loader.get_event()  # the document's end
        if not loader.check_event(yaml.StreamEndEvent):
            raise _Unusual  # several documents: the node graph's error
        return value
    finally:
        loader.constructed_objects = {}
        loader.recursive_objects = {}
        loader.deep_construct = False


def _from_events(loader: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise _OverLimit
    event = loader.get_event()
    cls = event.__class__
    below = depth + 1
    if cls is yaml.ScalarEvent:
        value: str = event.value
        if len(value) > MAX_SCALAR:
            raise _OverLimit
        tag = _scalar_tag(loader, event)
        if tag == STR_TAG:
            if len(value) < 2:
                return value
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
        node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
        if tag == INT_TAG:
            return _construct_int(loader, node)
        return loader.construct_object(node, deep=True)
    if cls is yaml.MappingStartEvent:
        if _collection_tag(loader, event, yaml.MappingNode) != MAP_TAG:
            raise _Unusual
        result = _new_dict(LineDict)
        result.line = event.start_mark.line + 1
        key_lines: dict[Any, int] = {}
        result.key_lines = key_lines
        result.duplicates = ()
        while not loader.check_event(yaml.MappingEndEvent):
            key_event: Any = loader.peek_event()
            line = key_event.start_mark.line + 1
            if (
                key_event.__class__ is not yaml.ScalarEvent
                or _scalar_tag(loader, key_event) in _KEY_TAGS_FLATTENED
            ):
                raise _Unusual
            key = _from_events(loader, below)
            if key in key_lines:
                _duplicate(result, key, line)
            result[key] = _from_events(loader, below)
            key_lines[key] = line
        loader.get_event()
        return result
    if cls is yaml.SequenceStartEvent:
        if _collection_tag(loader, event, yaml.SequenceNode) != SEQ_TAG:
            raise _Unusual
        items, lines = [], []
        while not loader.check_event(yaml.SequenceEndEvent):
            lines.append(loader.peek_event().start_mark.line + 1)
            items.append(_from_events(loader, below))
        loader.get_event()
        seq = _new_list(LineList)
        seq.extend(items)
        seq.line = event.start_mark.line + 1
        seq.item_lines = lines
        return seq
    raise _Unusual  # an alias (no anchor in the text: the node graph's error)


def _scalar_tag(loader: Any, event: Any) -> str:
    tag = event.tag
    if tag is None or tag == "!":  # as libyaml's composer resolves it
        tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
    return str(tag)


def _collection_tag(loader: Any, event: Any, kind: type) -> str:
    tag = event.tag
    if tag is None or tag == "!":
        tag = loader.resolve(kind, None, event.implicit)
    return str(tag)


def _stack_needed(text: str) -> int:
    longest = max(map(len, text.splitlines()), default=0)
    levels = text.count("[") + text.count("{") + 2 * (longest + 1) + 2
    return levels * STACK_PER_LEVEL + (1 << 20)


def _load_with_libyaml(text: str, stack: int) -> Any:
    return call_with_stack(stack, lambda: yaml.load(text, Loader=_CLoader))


DEFAULT_PARSER = "c"  # the tests set "pure" to load every test config both ways


def parser_for(text: str, prefer: str | None = None) -> str:
    """Which parser reads `text`: "c" (libyaml) when available and its stack can be
    bounded, else "pure"."""
    if (
        (prefer or DEFAULT_PARSER) == "c"
        and CSafeLoader is not None
        and _stack_needed(text) <= MAX_STACK
    ):
        return "c"
    return "pure"


def load_yaml(text: str, prefer: str | None = None) -> Any:
    """Parse one YAML document; raise YamlSyntaxError with a line number on bad syntax.
    `prefer="pure"` forces the pure-Python parser (the tests compare both)."""
    try:
        if parser_for(text, prefer) == "c":
            return _load_with_libyaml(text, _stack_needed(text))
        return yaml.load(text, Loader=_Loader)
    except RecursionError:
        raise YamlSyntaxError(
            0, f"YAML error: too large: nested deeper than {MAX_DEPTH} levels"
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        if "maximum nesting depth" in problem:
            # libyaml ≥ 0.2.5 (PyYAML 6.0.4 wheels) stops at its own depth (1,000) before our
            # composer sees the document: the same limit, said in our words.
            problem = f"too large: nested deeper than {MAX_DEPTH} levels"
        kind = (
            "YAML error"
            if problem.startswith(("too large", "a mapping key"))
            else "YAML syntax error"
        )
        raise YamlSyntaxError(line, f"{kind}: {problem}") from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(0, f"YAML error: {exc}") from None


def compose_marked(text: str) -> yaml.Node | None:
    """The node tree of `text` with where each node starts and ends (libyaml, with the
    stack the loader gives it), or None when libyaml cannot read it so: the config API
    uses it to change one line of a big file without a round-trip load of all of it."""
    if CSafeLoader is None or parser_for(text) != "c":
        return None
    try:
        node: yaml.Node | None = call_with_stack(
            _stack_needed(text), lambda: yaml.compose(text, Loader=CSafeLoader)
        )
    except (yaml.YAMLError, RecursionError):
        return None
    return node
