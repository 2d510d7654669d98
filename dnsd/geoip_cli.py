"""`dnsd geoip lookup IP`: where dnsd places a client address — region, country,
subdivision and this node's PoP — through the same code the server locates queries with
(`client_networks` of the config first, then the GeoIP database)."""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_DIR = "zones"


def add_parser(sub: argparse._SubParsersAction) -> None:
    geoip = sub.add_parser("geoip", help="geoip lookup IP: where dnsd places a client address")
    geoip.add_argument("action", choices=["lookup"])
    geoip.add_argument("address", metavar="IP")
    geoip.add_argument(
        "--dir",
        metavar="DIR",
        help=f"config directory: its client_networks place addresses first (default {DEFAULT_DIR}/ when it exists)",
    )
    geoip.add_argument("--geoip", metavar="FILE", help="MaxMind DB; default: the embedded one")
    geoip.add_argument("--pop-region", metavar="CODE", help="this node's region (unknown clients)")
    geoip.add_argument("--node", metavar="NAME", help="this node's name: its PoP")
    geoip.add_argument("--json", action="store_true", help="print JSON")


def lookup(args: argparse.Namespace) -> dict[str, Any]:
    from dnsd.geo.age import geoip_status
    from dnsd.geo.database import GeoDatabase
    from dnsd.geo.locate import locate, normalise
    from dnsd.geo.regions import region_table
    from dnsd.loading import load_snapshot
    from dnsd.snapshot import NodeSettings
    from dnsd.steering.client import ClientInfo, client_info

    address = ipaddress.ip_address(args.address)
    geo = GeoDatabase(args.geoip)
    node = NodeSettings(name=args.node, pop_region=args.pop_region)
    directory: Path | None = Path(args.dir or DEFAULT_DIR)
    if args.dir is None and not Path(DEFAULT_DIR).is_dir():
        directory = None  # no config here: the database alone places the address
    if directory is not None:
        client = client_info(load_snapshot(directory, 1, geo, node), address, None)
    else:
        location = locate(normalise(address), geo, region_table(), node.pop_region, None)
        client = ClientInfo(normalise(address), location=location, pop=node.name)
    loc = client.location
    return {
        "address": str(client.address),
        "region": loc.region,
        "country": loc.country,
        "subdivision": loc.subdivision,
        "pop": client.pop,
        "source": loc.source,
        "network": loc.network,
        "prefix_len": loc.prefix_len,
        "latitude": loc.latitude,
        "longitude": loc.longitude,
        "config": str(directory) if directory is not None else None,
        "database": geoip_status(geo, time.time()),
    }


def render(info: dict[str, Any]) -> str:
    db = info["database"]
    stale = "  STALE: give a newer one with --geoip FILE" if db["stale"] else ""
    where = f"client_networks {info['network']}" if info["network"] else info["source"]
    return "\n".join(
        [
            f"address:     {info['address']}",
            f"region:      {info['region'] or '-'}",
            f"country:     {info['country'] or '-'}",
            f"subdivision: {info['subdivision'] or '-'}",
            f"pop:         {info['pop'] or '-'}",
            f"placed by:   {where}",
            f"database:    {db['path']} ({db['type']}, built {db['build_date']}, "
            f"{db['age_days']} days old){stale}",
        ]
    )


def run(args: argparse.Namespace) -> int:
    from dnsd.errors import ConfigError

    try:
        info = lookup(args)
    except ConfigError as exc:
        for reason in exc.reasons:
            print(reason, file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"dnsd geoip: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(info, indent=2) if args.json else render(info))
    return 0
