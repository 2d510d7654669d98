"""`dnsd keys generate|list|roll ZONE`: DNSSEC keys of a zone."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dnsd.cli.flags import DEFAULT_DIR
from dnsd.cli.invocation import Invocation


def command(call: Invocation) -> int:
    return run(call.args)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = sub.add_parser("keys", help="DNSSEC keys of a zone: generate, list (with the DS), roll")
    keys.add_argument("action", choices=["generate", "list", "roll"])
    keys.add_argument("zone")
    keys.add_argument("--state-dir", default="state", metavar="DIR")
    keys.add_argument("--dir", default=DEFAULT_DIR, help="config directory (roll: the TTLs)")
    keys.add_argument("--algorithm", type=int, default=13, choices=[13, 15])
    keys.add_argument("--split", action="store_true", help="generate: a KSK and a ZSK")
    keys.add_argument(
        "--ksk",
        action="store_true",
        help="roll: the key the parent's DS points at (KSK or CSK), double-DS",
    )
    keys.add_argument(
        "--ds-seen",
        action="store_true",
        help="roll --ksk: the parent serves the new DS; switch keys",
    )


def run(args: argparse.Namespace) -> int:
    """`dnsd keys generate|list|roll ZONE`: `list` prints each key's tag, role and state and
    the DS record for the parent (`ZONE. IN DS TAG 13 2 HEX`); `roll` starts a pre-publish
    ZSK roll timed by the zone's TTLs (a running server follows it by itself)."""
    import time

    from dnsd.dnssec.keys import generate, load, roll, roll_sep
    from dnsd.errors import ConfigError

    zone = args.zone.lower().rstrip(".") + "."
    state = Path(args.state_dir)
    try:
        if args.action == "generate":
            for role in ("ksk", "zsk") if args.split else ("csk",):
                key = generate(state, zone, args.algorithm, role)
                print(f"generated {role} {key.tag} (algorithm {key.algorithm}) for {zone}")
        elif args.action == "roll":
            dnskey_ttl, max_ttl = zone_ttls(Path(args.dir), zone)
            if args.ksk:
                new = roll_sep(state, zone, dnskey_ttl, max_ttl, time.time(), args.ds_seen)
                if args.ds_seen:
                    print(
                        f"{zone}: {new.role} {new.tag} signs from "
                        f"{time.strftime('%H:%M:%S', time.localtime(new.activate))}"
                    )
                else:
                    print(
                        f"{zone}: new {new.role} {new.tag} published; give the parent its DS "
                        f"(below, and in CDS), then: dnsd keys roll {zone} --ksk --ds-seen"
                    )
            else:
                new = roll(state, zone, dnskey_ttl, max_ttl, time.time())
                print(
                    f"rolling the ZSK of {zone}: {new.tag} published now, signing from "
                    f"{time.strftime('%H:%M:%S', time.localtime(new.activate))}"
                )
        keys = load(state, zone, time.time())
    except (OSError, ValueError, KeyError, ConfigError) as exc:
        print(f"{state}: {exc}", file=sys.stderr)
        return 1
    if not keys.keys:
        print(
            f"{zone}: no keys in {state} (dnsd serve makes them at its first start)",
            file=sys.stderr,
        )
        return 1
    for key in keys.keys:
        print(f"key {key.tag} algorithm {key.algorithm} role {key.role} state {key.state(keys.at)}")
        if key.role in ("csk", "ksk"):
            print(f"{zone} IN DS {key.ds().to_text()}")
    return 0


def zone_ttls(directory: Path, zone: str) -> tuple[int, int]:
    """(the DNSKEY TTL, the longest TTL) of a zone as configured: what a key roll waits."""
    from dnsd.config.loader import load_config

    config, _ = load_config(directory)
    found = next((z for z in config.zones if z.name == zone), None)
    if found is None:
        raise ValueError(f"{directory}: no zone {zone}")
    lb_ttls = [config.load_balancers[lb].ttl for lb in found.lb_names.values()]
    return found.ttl, max([found.ttl, found.soa.ttl, *(s.ttl for s in found.rrsets), *lb_ttls])
