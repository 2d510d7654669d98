"""The `tsig_keys` section: name → algorithm and secret, the secret read from a file inside
the config directory or from an environment variable."""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from dnsd.config.checker import Checker, join
from dnsd.config.files import UnsafeFile, read_config_file
from dnsd.config.model import TsigKey
from dnsd.config.names import absolute, name_problem
from dnsd.config.yamlio import LineDict

TSIG_ALGORITHMS = ("hmac-sha256", "hmac-sha512")
MIN_TSIG_SECRET = 16  # bytes; RFC 8945 §6 asks for at least the hash's output length


def tsig_keys(ck: Checker, doc: LineDict) -> dict[str, tuple[TsigKey, int]]:
    """`tsig_keys`: name → algorithm and a base64 secret read from a file inside the config
    directory or from an environment variable (never from the YAML, never logged)."""
    keys: dict[str, tuple[TsigKey, int]] = {}
    table = ck.mapping(doc["tsig_keys"], doc.line_of("tsig_keys"), "tsig_keys")
    if table is None:
        return keys
    for name, spec in table.items():
        path = join("tsig_keys", name)
        line = table.line_of(name)
        key_name = absolute(str(name), ".")
        if not isinstance(name, str) or name_problem(key_name):
            ck.error(line, path, "a key name must be a DNS name (letters, digits, '-', '.')")
            continue
        d = ck.mapping(spec, line, path)
        if d is None:
            continue
        ck.keys(d, path, ("algorithm", "secret_file", "secret_env"))
        algorithm = ck.get_enum(d, "algorithm", path, TSIG_ALGORITHMS, default="hmac-sha256")
        if ("secret_file" in d) == ("secret_env" in d):
            ck.error(d.line, path, 'give exactly one of "secret_file" and "secret_env"')
            continue
        secret = _tsig_secret(ck, d, path)
        if secret is not None and algorithm is not None:
            keys[str(name)] = (TsigKey(str(name), algorithm, secret), line)
    return keys


def _tsig_secret(ck: Checker, d: LineDict, path: str) -> bytes | None:
    key = "secret_file" if "secret_file" in d else "secret_env"
    value = ck.get_str(d, key, path)
    if value is None:
        return None
    where = join(path, key)
    if key == "secret_file":
        directory = Path(ck.file).parent
        try:
            text = read_config_file(directory, directory / str(value))
        except (UnsafeFile, OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            ck.error(d.line_of(key), where, f"cannot read the secret file {value}: {reason}")
            return None
    else:
        text = os.environ.get(str(value), "")
        if not text:
            ck.error(d.line_of(key), where, f"the environment variable {value} is not set")
            return None
    try:
        secret = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        ck.error(d.line_of(key), where, "the secret is not base64")  # its text is never shown
        return None
    if len(secret) < MIN_TSIG_SECRET:
        ck.error(d.line_of(key), where, f"the secret is shorter than {MIN_TSIG_SECRET} bytes")
        return None
    return secret
