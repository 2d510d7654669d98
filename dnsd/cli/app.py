"""The `dnsd` parser, put together from each command's module, and the dispatch."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from dnsd import __version__
from dnsd.cli import check, config_show, explain, export, keys, serve, zone_import
from dnsd.cli.invocation import Invocation

Handler = Callable[[Invocation], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dnsd", description="Authoritative DNS server for failover and geo-steering."
    )
    parser.add_argument("--version", action="version", version=f"dnsd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (serve, config_show, check, explain, export, keys, zone_import):
        module.add_parser(sub)

    from dnsd.drill.arguments import add_parsers
    from dnsd.geoip_cli import add_parser as add_geoip
    from dnsd.lab.cli import add_parser as add_lab

    add_parsers(sub)
    add_lab(sub)
    add_geoip(sub)
    return parser


def _drill(call: Invocation) -> int:
    from dnsd.drill.cli import run_drill

    return run_drill(call.args)


def _backends(call: Invocation) -> int:
    from dnsd.drill.cli import run_backends

    return run_backends(call.args)


def _demo(call: Invocation) -> int:
    from dnsd.drill.cli import run_demo

    return run_demo(call.args)


def _geoip(call: Invocation) -> int:
    from dnsd.geoip_cli import run

    return run(call.args)


def _lab(call: Invocation) -> int:
    from dnsd.lab.cli import run_lab

    return run_lab(call.args)


COMMANDS: dict[str, Handler] = {
    "serve": serve.command,
    "config": config_show.command,
    "check": check.command,
    "explain": explain.command,
    "export": export.command,
    "keys": keys.command,
    "import": zone_import.command,
    "drill": _drill,
    "backends": _backends,
    "demo": _demo,
    "geoip": _geoip,
    "lab": _lab,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    whole_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    handler = COMMANDS.get(args.command)
    return 2 if handler is None else handler(Invocation(parser, args, argv, whole_process))
