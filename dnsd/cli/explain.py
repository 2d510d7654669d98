"""`dnsd explain`: every decision step for one query, local or from a running server."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dnsd.admin_url import admin_url
from dnsd.cli.flags import DEFAULT_DIR
from dnsd.cli.invocation import Invocation


def command(call: Invocation) -> int:
    return run(call.args)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    explain = sub.add_parser("explain", help="show every decision step for one query")
    explain.add_argument("name")
    explain.add_argument("--type", default="A", help="query type (default A)")
    explain.add_argument("--client", default="127.0.0.1", help="the querying address")
    explain.add_argument("--ecs", metavar="PREFIX", help="EDNS Client Subnet, e.g. 81.2.69.0/24")
    explain.add_argument(
        "--dir", default=DEFAULT_DIR, help="config directory (every backend healthy)"
    )
    explain.add_argument(
        "--down",
        action="append",
        default=[],
        metavar="NAME",
        help="mark a pool, pool/backend or backend down (repeatable)",
    )
    explain.add_argument("--geoip", metavar="FILE")
    explain.add_argument("--pop-region", metavar="CODE")
    explain.add_argument("--node", metavar="NAME")
    explain.add_argument(
        "--server",
        metavar="URL",
        type=admin_url,
        help="ask a running dnsd's admin API (live health): http://HOST:PORT, or HOST:PORT",
    )
    explain.add_argument("--seed", type=int, help="seed the random source (trickle, random)")
    explain.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    import json
    import random
    import time

    from dnsd.errors import ConfigError
    from dnsd.explain import ExplainError, explain_query, health_with_down, render_text
    from dnsd.geo.database import GeoDatabase
    from dnsd.loading import load_snapshot
    from dnsd.snapshot import NodeSettings

    if args.server:
        return explain_remote(args)
    try:
        geo = GeoDatabase(args.geoip)
        node = NodeSettings(name=args.node, pop_region=args.pop_region)
        snap = load_snapshot(Path(args.dir), 1, geo, node)
        health = health_with_down(snap.config, args.down)
        info = explain_query(
            snap,
            health,
            args.name,
            args.type.upper(),
            args.client,
            args.ecs,
            random.Random(args.seed),
            time.time(),
        )
    except ConfigError as exc:
        for reason in exc.reasons:
            print(reason, file=sys.stderr)
        return 1
    except (ExplainError, OSError, ValueError) as exc:
        print(f"dnsd explain: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(info, indent=2) if args.json else render_text(info))
    return 0


def explain_remote(args: argparse.Namespace) -> int:
    """`dnsd explain --server URL`: the same explanation from a running server."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    from dnsd.admin_url import unreachable
    from dnsd.explain import render_text

    params = {"name": args.name, "type": args.type.upper(), "client": args.client}
    if args.ecs:
        params["ecs"] = args.ecs
    url = args.server.rstrip("/") + "/api/v1/explain?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            info = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        print(f"dnsd explain: {exc.code}: {exc.read().decode(errors='replace')}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"dnsd explain: {unreachable(args.server, exc)}", file=sys.stderr)
        return 2
    print(json.dumps(info, indent=2) if args.json else render_text(info))
    return 0
