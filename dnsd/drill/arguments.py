"""The `dnsd drill`, `dnsd backends` and `dnsd demo` command lines. Apart from the commands
(dnsd.drill.cli): building the parser for any command must not load the drills' HTTP
client and servers."""

from __future__ import annotations

import argparse

from dnsd.admin_url import admin_url
from dnsd.drill.config import SCENARIOS


def add_parsers(sub: argparse._SubParsersAction) -> None:
    drill = sub.add_parser(
        "drill",
        help="run a failover drill and measure it",
        description="dnsd drill SCENARIO: the demo drills; dnsd drill run PLAN.yaml: a drill "
        "plan on your own names, pools and resolvers (docs/drills.md)",
    )
    drill.add_argument("scenario", choices=[*SCENARIOS, "all", "run"])
    drill.add_argument("plan", nargs="?", metavar="PLAN.yaml", help="with run: the drill plan")
    drill.add_argument(
        "--server",
        metavar="URL",
        type=admin_url,
        help="drill a running dnsd through its admin API: http://HOST:PORT, or HOST:PORT",
    )
    drill.add_argument(
        "--dns",
        metavar="ADDR:PORT",
        help="with --server: dnsd's DNS address (default 127.0.0.1:5353; run: the plan's dns)",
    )
    drill.add_argument(
        "--resolver",
        action="append",
        metavar="ADDR:PORT",
        help="with --server or run: a caching resolver in front of it (run: repeatable)",
    )
    drill.add_argument(
        "--control",
        metavar="URL",
        help="with --server: the demo-backend control URL (dnsd demo: http://127.0.0.1:8054)",
    )
    drill.add_argument("--no-resolver", action="store_true", help="in a box: skip unbound")
    drill.add_argument("--json", metavar="FILE", help="write the result as JSON")
    drill.add_argument(
        "--plot",
        metavar="FILE.png|DIR",
        help="draw the timeline (all: one FILE-SCENARIO.png each; run: one PNG per step in DIR)",
    )
    drill.add_argument(
        "--junit", metavar="FILE", help="run: JUnit XML, a test case per expectation"
    )
    drill.add_argument("--report", metavar="FILE.html", help="run: a self-contained HTML report")
    drill.add_argument(
        "--dry-run",
        action="store_true",
        help="run: check the plan against the live config and print what would happen",
    )
    drill.add_argument("--quiet", action="store_true", help="no progress display")

    backends = sub.add_parser("backends", help="serve demo backends (for a deployment test bed)")
    backends.add_argument("backends", nargs="+", metavar="NAME=ADDR:PORT")
    backends.add_argument("--control", default="127.0.0.1:8054", metavar="ADDR:PORT")

    demo = sub.add_parser("demo", help="a playground on loopback: demo backends + dnsd")
    demo.add_argument("--listen", default="127.0.0.1:5353", metavar="ADDR:PORT")
    demo.add_argument("--admin", default="127.0.0.1:8053", metavar="ADDR:PORT")
    demo.add_argument(
        "--control", default="127.0.0.1:8054", metavar="ADDR:PORT", help="demo-backend control"
    )
