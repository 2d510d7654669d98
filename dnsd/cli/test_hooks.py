"""Faults only dnsd's own tests cause, switched on by hidden `dnsd serve` flags (never by the
environment, so a stray variable cannot break a production server): a serving loop that
raises while a file named after it exists (`--test-fault-dir`), broken signatures, so a test
proves validators check (`--test-corrupt-signatures`), and a pause between the renames of a
multi-file write, so a test can kill the process inside that window
(`--test-pause-between-renames`). Workers get the same flags (dnsd.cli.worker_argv)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dnsd import atomic_files
from dnsd.dnssec import signature
from dnsd.net import supervisor


def apply(args: argparse.Namespace) -> None:
    if args.test_fault_dir:
        supervisor.SWITCHES.fault_dir = Path(args.test_fault_dir)
    signature.SWITCHES.corrupt = bool(args.test_corrupt_signatures)
    atomic_files.SWITCHES.pause_between_renames_s = max(0.0, args.test_pause_between_renames)
