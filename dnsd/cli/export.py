"""`dnsd export ZONE`: a zone as RFC 1035 text (what AXFR sends)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dnsd.cli.flags import DEFAULT_DIR
from dnsd.cli.invocation import Invocation


def command(call: Invocation) -> int:
    return run(call.args)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = sub.add_parser("export", help="print a zone as RFC 1035 text (what AXFR sends)")
    export.add_argument("zone")
    export.add_argument("--dir", default=DEFAULT_DIR, help="config directory")
    export.add_argument(
        "--state-dir", metavar="DIR", help="take the served serial from this state directory"
    )


def run(args: argparse.Namespace) -> int:
    """`dnsd export ZONE`: the zone as this config and the state directory (its overrides
    and served serial) make it, every monitored backend in its monitor's `initial` state
    (without --state-dir: every backend healthy, as `explain` assumes); a running server's
    live answers come from an AXFR."""
    import time

    from dnsd.dnssec.zone_signing import signed_zone
    from dnsd.errors import ConfigError
    from dnsd.explain import health_with_down
    from dnsd.health.store import HealthStore
    from dnsd.loading import load_snapshot
    from dnsd.xfr.content import zone_content
    from dnsd.xfr.versions import ZoneVersions
    from dnsd.xfr.zonetext import export_text, signed_text

    state = Path(args.state_dir) if args.state_dir else None
    try:  # with the state dir: its DNSSEC keys too (a signed zone exports signed)
        snap = load_snapshot(Path(args.dir), 1, key_dir=state, create_keys=False)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    zone = args.zone.lower().rstrip(".") + "."
    if zone not in snap.zones:
        print(f"{args.dir}: no zone {zone} (zones: {', '.join(snap.zones)})", file=sys.stderr)
        return 1
    if state is None:
        health = health_with_down(snap.config, [])
    else:  # the persisted overrides apply, as they do in the server
        store = HealthStore(state)
        store.set_snapshot(snap)
        health = store.view
    snap = ZoneVersions(state, persist=False).update(snap, health, time.time())
    content = zone_content(snap, health, zone, time.time())
    lbs = {owner: lb for z in snap.config.zones for owner, lb in z.lb_names.items()}
    keys = snap.signing.get(zone)
    if keys is not None:  # signed as AXFR sends it: NSEC chain and RRSIGs
        soa, rrsets = signed_zone(
            zone,
            content.soa,
            content.rrsets(),
            content.digest,
            keys,
            snap.zones[zone].config.ttl,
            time.time(),
        )
        sys.stdout.write(signed_text(zone, soa, rrsets, str(args.dir)))
        return 0
    sys.stdout.write(export_text(content, lbs, str(args.dir)))
    return 0
