"""`dnsd check`: validate a config directory (and a server file); exit 1 on errors."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path
from typing import Any

from dnsd.cli.flags import DEFAULT_DIR, subparser
from dnsd.cli.invocation import Invocation
from dnsd.config.loader import check_report
from dnsd.process_tools import gc_paused


def command(call: Invocation) -> int:
    args = call.args
    if args.config:  # the server file too, with file:line errors
        from dnsd.serverfile import read

        serve = subparser(call.parser, "serve")
        values, reasons = read(Path(args.config), serve)
        for reason in reasons:
            print(reason, file=sys.stderr)
        if reasons:
            return 1
        problems = serve_problems(serve, values)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            return 1
    if not call.whole_process:
        return run_check(Path(args.dir))
    # The whole process is the check. Its objects are frozen out of the cyclic GC before
    # collection resumes (the first pass after a load would walk the millions a big
    # configuration made: 0.5 s of 10,000 load balancers and 100,000 records), and it
    # exits without freeing them object by object (about 1 s); only the output streams
    # have anything left to do.
    with gc_paused():
        code = run_check(Path(args.dir))
        gc.freeze()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = sub.add_parser("check", help="validate the config in DIR; exit 1 on errors")
    check.add_argument("dir", nargs="?", default=DEFAULT_DIR)
    check.add_argument("--config", metavar="FILE", help="also check this server file")


def serve_problems(serve: argparse.ArgumentParser, values: dict[str, Any]) -> tuple[str, ...]:
    """What `dnsd serve --config FILE` (no flags) would refuse to start with: the same
    judge (dnsd.cli.settings), so the same messages."""
    from dnsd.cli.settings import SettingsError, serve_settings
    from dnsd.serverfile import merge

    args = serve.parse_args([])  # the defaults, the file's values over them
    merge(args, set(), values)
    try:
        serve_settings(args)
    except SettingsError as exc:
        return exc.messages
    return ()


def run_check(directory: Path) -> int:
    reasons, budgets = check_report(directory)
    for line in budgets:
        print(line)
    for reason in reasons:
        print(reason, file=sys.stderr)
    errors = [r for r in reasons if not r.warning]
    if errors:
        print(f"{len(errors)} error(s) in {directory}", file=sys.stderr)
        return 1
    print(f"{directory}: OK ({len(reasons)} warning(s))")
    return 0
