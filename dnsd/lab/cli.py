"""`dnsd lab up|down|status` and `dnsd lab drill SCENARIO|all [--json FILE] [--plot DIR]`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dnsd.drill.plots import can_plot

SCENARIO_NAMES = (
    "partial-outage",
    "dynamic-rtt",
    "node-down",
    "redis-partition",
    "region-isolated",
    "region-down",
    "redis-failover",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    lab = sub.add_parser("lab", help="a three-region lab in network namespaces (root)")
    actions = lab.add_subparsers(dest="action", required=True)
    actions.add_parser("up", help="build the lab and leave it running")
    actions.add_parser("down", help="stop every lab process and remove the namespaces")
    actions.add_parser("status", help="what is running, and each region's answer")
    drill = actions.add_parser(
        "drill", help="run lab scenarios (builds and removes the lab when it is not up)"
    )
    drill.add_argument("scenario", choices=[*SCENARIO_NAMES, "all"])
    drill.add_argument("--json", metavar="FILE", help="write the results (a list of drill objects)")
    drill.add_argument("--plot", metavar="DIR", help="draw each scenario's timeline into DIR")


def run_lab(args: argparse.Namespace) -> int:
    from dnsd.drill.report import plot, table
    from dnsd.lab.lab import Lab
    from dnsd.lab.netns import LabError, namespaces, netem_supported
    from dnsd.lab.scenarios import SCENARIOS

    lab = Lab()
    try:
        if args.action == "up":
            lab.up()
            print(json.dumps(lab.status(), indent=2))
            return 0
        if args.action == "down":
            lab.down()
            return 0
        if args.action == "status":
            print(json.dumps(lab.status(), indent=2))
            return 0
        wanted = SCENARIO_NAMES if args.scenario == "all" else (args.scenario,)
        missing = [s for s in wanted if s not in SCENARIOS]
        for name in missing:
            why = "not built yet"
            if name == "dynamic-rtt" and not netem_supported():
                why = "needs tc netem for per-path delay, and this kernel has no sch_netem"
            print(f"{name}: not run: {why} (docs/lab.md)", file=sys.stderr)
        if missing and args.scenario != "all":
            return 2
        was_up = bool(namespaces())
        if not was_up:
            lab.up()
        try:
            results = [SCENARIOS[s](lab) for s in wanted if s in SCENARIOS]
        finally:
            if not was_up:
                lab.down()
    except LabError as exc:
        print(f"dnsd lab: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        lab.down()
        return 130
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_json() for r in results], indent=2) + "\n")
    if args.plot and can_plot("--plot"):
        Path(args.plot).mkdir(parents=True, exist_ok=True)
        for result in results:
            plot(result, Path(args.plot) / f"{result.scenario}.png")
    return 0 if all(r.passed for r in results) and not missing else 1
