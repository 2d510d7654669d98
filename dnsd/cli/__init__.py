"""Command line: `dnsd serve`, `dnsd check`, … (docs/operations.md). One module per
command, each with its parser and its handler; `app` puts them together."""

from __future__ import annotations

from dnsd.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
