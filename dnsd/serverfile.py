"""The server file (`dnsd serve --config FILE`, docs/operations.md): a YAML mapping
with one key per `serve` flag, dashes as underscores (`listen: [...]`, `admin`,
`state_dir`, `rrl_rate`, `workers`, `redis`, `log_format`, …) and `dir` for the zone
directory. Flags given on the command line win over the file; the file wins over the
defaults. Values are checked by the flags' own parsers, and every problem is reported as
`file:line: key: message`, like the zone files.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dnsd.admin.gate import SCOPES, Token
from dnsd.admin.webhooks import EVENTS, Webhook
from dnsd.config.checker import Checker
from dnsd.config.files import UnsafeFile
from dnsd.config.yamlio import LineDict, LineList, YamlSyntaxError, load_yaml
from dnsd.errors import Reason

MAX_BYTES = 1 << 20
NOT_SETTINGS = frozenset(
    {
        "help",
        "config",
        "follow_fd",
        "action",
        "test_fault_dir",
        "test_corrupt_signatures",
        "test_pause_between_renames",
    }
)


def settings(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The flag settings a server file may hold: every serve flag (and `dir`), by key."""
    return {a.dest: a for a in parser._actions if a.dest not in NOT_SETTINGS}


FILE_ONLY = ("tokens", "webhooks", "dnstap_messages")  # settings with no flag
DNSTAP_KEYS = {
    "socket": "dnstap_socket",
    "file": "dnstap_file",
    "identity": "dnstap_identity",
    "sample": "dnstap_sample",
}
DNSTAP_MESSAGES = ("auth_query", "auth_response", "update_query", "update_response")


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
    ck.keys(d, "", [*known, "tokens", "webhooks", "dnstap"])
    values: dict[str, Any] = {}
    if "tokens" in d:
        values["tokens"] = _tokens(ck, d, path.parent)
    if "webhooks" in d:
        values["webhooks"] = _webhooks(ck, d, path.parent)
    if "dnstap" in d:
        values.update(_dnstap(ck, d, known))
    for key, raw in d.items():
        action = known.get(str(key))
        if action is None:
            continue
        try:
            values[action.dest] = _convert(action, raw)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
            ck.error(d.line_of(key), str(key), str(exc) or "invalid value")
    return values, ck.reasons


def _entries(ck: Checker, d: LineDict, key: str, shape: str) -> Iterator[tuple[str, LineDict]]:
    """The mappings of a list setting (`tokens`, `webhooks`), each with its path."""
    entries = d[key]
    if not isinstance(entries, LineList):
        ck.error(d.line_of(key), key, f"expected a list of {shape}")
        return
    for i, entry in enumerate(entries):
        item = ck.mapping(entry, entries.line_of(i), f"{key}[{i}]")
        if item is not None:
            yield f"{key}[{i}]", item


def _tokens(ck: Checker, d: LineDict, directory: Path) -> tuple[Token, ...]:
    """`tokens: [{name, scope: read|override|admin, sha256: HEX}]` (or `secret_file:`,
    relative to the server file): only a hash of each secret is ever kept."""
    out: list[Token] = []
    for path, item in _entries(ck, d, "tokens", "{name, scope, sha256}"):
        ck.keys(item, path, ("name", "scope", "sha256", "secret_file"), required=("name", "scope"))
        name = ck.get_str(item, "name", path, default=None)
        scope = ck.get_enum(item, "scope", path, SCOPES, default=None)
        if ("sha256" in item) == ("secret_file" in item):
            ck.error(item.line, path, 'give exactly one of "sha256" and "secret_file"')
            continue
        digest = _token_digest(ck, item, path, directory)
        if name in {t.name for t in out}:
            ck.error(item.line, f"{path}.name", f"token name {name!r} is used twice")
        elif name and scope and digest is not None:
            out.append(Token(str(name), str(scope), digest))
    return tuple(out)


def _webhooks(ck: Checker, d: LineDict, directory: Path) -> tuple[Webhook, ...]:
    """`webhooks: [{url, events: [...], secret | secret_file, format: json|slack}]`."""
    out: list[Webhook] = []
    for path, item in _entries(ck, d, "webhooks", "{url, events, secret}"):
        ck.keys(
            item,
            path,
            ("url", "events", "secret", "secret_file", "format"),
            required=("url", "events"),
        )
        url = ck.get_str(item, "url", path, default=None)
        if url and not str(url).startswith(("http://", "https://")):
            ck.error(item.line_of("url"), f"{path}.url", "an http:// or https:// URL")
            url = None
        events = [
            e
            for e, _ in ck.str_list(
                item.get("events", LineList()), item.line_of("events"), f"{path}.events"
            )
        ]
        for event in events:
            if event not in EVENTS:
                ck.error(
                    item.line_of("events"),
                    f"{path}.events",
                    f"{event!r} is not one of {', '.join(EVENTS)}",
                )
        fmt = ck.get_enum(item, "format", path, ("json", "slack"), default="json")
        if ("secret" in item) == ("secret_file" in item):
            ck.error(item.line, path, 'give exactly one of "secret" and "secret_file"')
            continue
        secret = (
            str(item["secret"]).encode()
            if "secret" in item
            else _read_secret(ck, item, f"{path}.secret_file", directory)
        )
        if url and secret and fmt and all(e in EVENTS for e in events):
            out.append(Webhook(str(url), frozenset(events), secret, str(fmt)))
    return tuple(out)


def _dnstap(ck: Checker, d: LineDict, known: dict[str, argparse.Action]) -> dict[str, Any]:
    """`dnstap: {socket | file, identity, messages: [...], sample}`: the `--dnstap-*` flags'
    settings (a flag given still wins) and `messages`, which has no flag."""
    item = ck.mapping(d["dnstap"], d.line_of("dnstap"), "dnstap")
    if item is None:
        return {}
    ck.keys(item, "dnstap", [*DNSTAP_KEYS, "messages"])
    values: dict[str, Any] = {}
    for key, dest in DNSTAP_KEYS.items():
        if key in item and dest in known:
            try:
                values[dest] = _convert(known[dest], item[key])
            except (ValueError, TypeError) as exc:
                ck.error(item.line_of(key), f"dnstap.{key}", str(exc) or "invalid value")
    if "messages" in item:
        line = item.line_of("messages")
        chosen = [m for m, _ in ck.str_list(item["messages"], line, "dnstap.messages")]
        if bad := [m for m in chosen if m not in DNSTAP_MESSAGES]:
            ck.error(
                line, "dnstap.messages", f"{bad[0]!r} is not one of {', '.join(DNSTAP_MESSAGES)}"
            )
        elif not chosen:
            ck.error(line, "dnstap.messages", "name at least one")
        else:
            values["dnstap_messages"] = chosen
    return values


def _read_small_regular(where: Path, cap: int) -> bytes:
    """At most `cap` bytes of a regular file. Opened without blocking and refused unless
    regular: a FIFO would block the caller, /dev/zero would grow memory without end."""
    fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = os.read(fd, cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise ValueError(f"larger than {cap // 1024} KiB")
    return data


def _read_secret(ck: Checker, item: LineDict, path: str, directory: Path) -> bytes | None:
    where = directory / str(item["secret_file"])
    try:
        secret = _read_small_regular(where, 4096).decode("utf-8").strip()
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        ck.error(item.line_of("secret_file"), path, f"cannot read: {reason}")
        return None
    if len(secret) < 16:
        ck.error(item.line_of("secret_file"), path, "a secret of at least 16 characters")
        return None
    return secret.encode()


def _token_digest(ck: Checker, item: LineDict, path: str, directory: Path) -> bytes | None:
    if "sha256" in item:
        text = str(item["sha256"]).strip().lower()
        if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
            ck.error(item.line_of("sha256"), f"{path}.sha256", "expected 64 hex digits")
            return None
        return bytes.fromhex(text)
    secret = _read_secret(ck, item, f"{path}.secret_file", directory)
    return None if secret is None else hashlib.sha256(secret).digest()


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
    for key in FILE_ONLY:
        if key in values:
            setattr(args, key, values[key])
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
