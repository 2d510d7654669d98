"""What a command's handler gets: the parsed arguments and what they were parsed from."""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Invocation:
    parser: argparse.ArgumentParser  # the whole `dnsd` parser (its subparsers by command)
    args: argparse.Namespace
    argv: list[str]  # the arguments parsed (without the program name)
    whole_process: bool  # `dnsd` itself, not main() called from Python: may os._exit
