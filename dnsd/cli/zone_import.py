"""`dnsd import FILE`: the YAML zone for an RFC 1035 zone file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dnsd.cli.flags import DEFAULT_DIR
from dnsd.cli.invocation import Invocation


def command(call: Invocation) -> int:
    return run(call.args)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imp = sub.add_parser("import", help="write the YAML zone for an RFC 1035 zone file")
    imp.add_argument("file")
    imp.add_argument("--out", default=DEFAULT_DIR, help="config directory to write into")


def run(args: argparse.Namespace) -> int:
    """`dnsd import FILE`: write ZONE.yaml into --out (never over an existing file)."""
    from dnsd.config.zonefile import ZoneFileError, read_zone_file
    from dnsd.xfr.zonetext import import_yaml, origin_of

    path = Path(args.file).resolve()
    try:
        origin = origin_of(path, path.read_text(encoding="utf-8"))
        records = read_zone_file(path, origin, path.parent, 3600)
    except ZoneFileError as exc:
        where = f"{exc.file}:{exc.line}" if exc.line else exc.file
        print(f"{where}: {exc.message}", file=sys.stderr)
        return 1
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{path}: cannot read: {exc}", file=sys.stderr)
        return 1
    text, warnings = import_yaml(origin, records, str(path))
    for warning in warnings:
        print(f"{path}: warning: {warning}", file=sys.stderr)
    out = Path(args.out) / f"{origin.rstrip('.') or 'root'}.yaml"
    if out.exists():
        print(f"{out}: exists; not overwritten", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return 0
