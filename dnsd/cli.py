"""Command line: `dnsd serve`, `dnsd check` (docs/operations.md)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
from pathlib import Path

from dnsd import __version__
from dnsd.admin.token_env import admin_token_from_environment
from dnsd.admin_url import admin_url
from dnsd.config.loader import check_report
from dnsd.net import SERVING_LOOPS, UDP_LOOPS
from dnsd.net.proxy_protocol import parse_networks
from dnsd.net.rrl import RrlSettings
from dnsd.process_tools import gc_paused

RRL_DEFAULTS = RrlSettings()  # `dnsd serve` and ServerOptions share these defaults

DEFAULT_DIR = "zones"
DEFAULT_LISTEN = "127.0.0.1:5353"


def parse_listen(value: str) -> tuple[str, int]:
    """`127.0.0.1:5353`, `[::1]:5353` or `:5353` (all IPv4 addresses) → (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected ADDR:PORT, got {value!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """`dnsd serve`'s flags (also `dnsd config show`'s: the same settings)."""
    serve.add_argument("dir", nargs="?", default=DEFAULT_DIR, help="config directory (zones/)")
    serve.add_argument(
        "--listen",
        action="append",
        type=parse_listen,
        metavar="ADDR:PORT",
        help=f"UDP+TCP listen address, repeatable (default {DEFAULT_LISTEN}); port 0 picks one",
    )
    serve.add_argument(
        "--geoip", metavar="FILE", help="MaxMind DB (City or Country); default: embedded"
    )
    serve.add_argument("--pop-region", metavar="CODE", help="this node's region (unknown clients)")
    serve.add_argument("--node", metavar="NAME", help="this node's name, the PoP for pop_pools")
    serve.add_argument(
        "--state-dir", default="state", metavar="DIR", help="persisted overrides (default state/)"
    )
    serve.add_argument(
        "--admin", default="127.0.0.1:8053", metavar="ADDR:PORT",
        help="admin HTTP API, metrics and status page (default 127.0.0.1:8053; 'off' disables)",
    )  # fmt: skip
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--log-format", default="text", choices=["text", "json"])
    serve.add_argument(
        "--rrl-rate", type=float, default=RRL_DEFAULTS.rate, metavar="N",
        help=f"response rate limit per client /24 (/56) and response, per second; 0 disables (default {RRL_DEFAULTS.rate:g})",
    )  # fmt: skip
    serve.add_argument(
        "--rrl-slip", type=int, default=RRL_DEFAULTS.slip, metavar="N",
        help=f"send every N-th rate-limited reply truncated (TC=1); 0 never (default {RRL_DEFAULTS.slip})",
    )  # fmt: skip
    serve.add_argument(
        "--redis", metavar="URL",
        help="share health and config with other nodes: redis://[USER:PASS@]HOST:PORT/DB, rediss://"
        " (TLS), redis+sentinel://[USER:PASS@]H1:P1,H2:P2/SERVICE[/DB]",
    )  # fmt: skip
    serve.add_argument(
        "--redis-ca-file", metavar="FILE",
        help="rediss://: the CA certificate(s) the Redis server's certificate must chain to"
        " (default: the system's CA store)",
    )  # fmt: skip
    serve.add_argument(
        "--redis-key-file", metavar="FILE",
        help="the cluster key (at least 16 bytes) that seals every health bus message",
    )  # fmt: skip
    serve.add_argument(
        "--redis-insecure", action="store_true",
        help="share health through Redis without a cluster key (anyone who can write to Redis can then move answers)",
    )  # fmt: skip
    serve.add_argument(
        "--cluster-nodes", metavar="NAME,...",
        help="the only node names health bus messages may come from",
    )  # fmt: skip
    serve.add_argument(
        "--redis-max-age", type=float, default=30.0, metavar="SECONDS",
        help="another node's observation stops counting after this long without news (default 30)",
    )  # fmt: skip
    serve.add_argument(
        "--no-answer-cache", action="store_true", help="answer every query the long way"
    )
    serve.add_argument(
        "--event-loop", default="auto", choices=["auto", "uvloop", "asyncio"],
        help="uvloop when installed (auto, measured faster), or the standard asyncio loop",
    )  # fmt: skip
    serve.add_argument(
        "--udp-loop", default=UDP_LOOPS[0], choices=UDP_LOOPS,
        help="UDP in a blocking socket loop thread (default, measured faster) or on the event loop",
    )  # fmt: skip
    serve.add_argument(
        "--serving-loop", default=SERVING_LOOPS[0], choices=SERVING_LOOPS,
        help="the UDP thread answers cache hits in compiled code when it was built at install"
        " (auto, the default; compiled: refuse to start without it) or in Python (pure)",
    )  # fmt: skip
    serve.add_argument(
        "--reuse-port",
        action="store_true",
        help="SO_REUSEPORT, so a new dnsd can take over the port before the old one stops",
    )
    serve.add_argument(
        "--workers", type=int, default=1, metavar="N",
        help="N processes answer on the same addresses (SO_REUSEPORT); this one probes for all (default 1)",
    )  # fmt: skip
    serve.add_argument("--follow-fd", type=int, help=argparse.SUPPRESS)  # a worker's pipe
    serve.add_argument(
        "--query-log-sample",
        type=float,
        default=0.0,
        metavar="RATE",
        help="log this share of queries (0..1, default 0)",
    )
    serve.add_argument("--dnstap-socket", metavar="PATH",
                       help="send dnstap to this Frame Streams reader's Unix socket")  # fmt: skip
    serve.add_argument("--dnstap-file", metavar="PATH", help="write dnstap to this file")
    serve.add_argument("--dnstap-identity", metavar="NAME",
                       help="the dnstap identity (default: the host name)")  # fmt: skip
    serve.add_argument("--dnstap-sample", type=int, default=1, metavar="N",
                       help="dnstap logs one query in N (default 1: all)")  # fmt: skip
    serve.add_argument(
        "--proxy-protocol-from", action="append", type=parse_networks, metavar="CIDR[,CIDR...]",
        help="peers (dnsdist, haproxy) whose every datagram and connection starts with a PROXY v2"
        " header: the client is the address it carries; repeatable",
    )  # fmt: skip
    serve.add_argument(
        "--config", metavar="FILE", help="the server file (YAML): one key per flag; flags win"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dnsd", description="Authoritative DNS server for failover and geo-steering."
    )
    parser.add_argument("--version", action="version", version=f"dnsd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve the zones in DIR over UDP and TCP")
    add_serve_arguments(serve)
    config = sub.add_parser("config", help="config show: the effective server settings")
    config.add_argument("action", choices=["show"])
    add_serve_arguments(config)

    check = sub.add_parser("check", help="validate the config in DIR; exit 1 on errors")
    check.add_argument("dir", nargs="?", default=DEFAULT_DIR)
    check.add_argument("--config", metavar="FILE", help="also check this server file")

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
        "--server", metavar="URL", type=admin_url,
        help="ask a running dnsd's admin API (live health): http://HOST:PORT, or HOST:PORT",
    )  # fmt: skip
    explain.add_argument("--seed", type=int, help="seed the random source (trickle, random)")
    explain.add_argument("--json", action="store_true", help="print JSON")

    export = sub.add_parser("export", help="print a zone as RFC 1035 text (what AXFR sends)")
    export.add_argument("zone")
    export.add_argument("--dir", default=DEFAULT_DIR, help="config directory")
    export.add_argument(
        "--state-dir", metavar="DIR", help="take the served serial from this state directory"
    )
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
    keys.add_argument("--ds-seen", action="store_true",
                      help="roll --ksk: the parent serves the new DS; switch keys")  # fmt: skip
    imp = sub.add_parser("import", help="write the YAML zone for an RFC 1035 zone file")
    imp.add_argument("file")
    imp.add_argument("--out", default=DEFAULT_DIR, help="config directory to write into")

    from dnsd.drill.cli import add_parsers
    from dnsd.geoip_cli import add_parser as add_geoip
    from dnsd.lab.cli import add_parser as add_lab

    add_parsers(sub)
    add_lab(sub)
    add_geoip(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv_given = argv
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.command in ("serve", "config"):
        sources = apply_server_file(parser, args, argv)
        if sources is None:
            return 2
        if args.command == "config":
            return show_config(args, sources)
    if args.command == "check":
        if args.config:  # the server file too, with file:line errors
            from dnsd.serverfile import read

            _, reasons = read(Path(args.config), subparser(parser, "serve"))
            for reason in reasons:
                print(reason, file=sys.stderr)
            if reasons:
                return 1
        if argv_given is not None:
            return run_check(Path(args.dir))
        # The whole process is the check. Its objects are frozen out of the cyclic GC
        # before collection resumes (the first pass after a load would walk the millions
        # a big configuration made: 0.5 s of 10,000 load balancers and 100,000 records),
        # and it exits without freeing them object by object (about 1 s); only the output
        # streams have anything left to do.
        with gc_paused():
            code = run_check(Path(args.dir))
            gc.freeze()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if args.command == "serve":
        return run_serve(args)
    if args.command == "explain":
        return run_explain(args)
    if args.command == "export":
        return run_export(args)
    if args.command == "import":
        return run_import(args)
    if args.command == "keys":
        return run_keys(args)
    if args.command == "drill":
        from dnsd.drill.cli import run_drill

        return run_drill(args)
    if args.command == "backends":
        from dnsd.drill.cli import run_backends

        return run_backends(args)
    if args.command == "demo":
        from dnsd.drill.cli import run_demo

        return run_demo(args)
    if args.command == "geoip":
        from dnsd.geoip_cli import run as run_geoip

        return run_geoip(args)
    if args.command == "lab":
        from dnsd.lab.cli import run_lab

        return run_lab(args)
    return 2


def run_export(args: argparse.Namespace) -> int:
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
        soa, rrsets = signed_zone(zone, content.soa, content.rrsets(), content.digest, keys,
                                  snap.zones[zone].config.ttl, time.time())  # fmt: skip
        sys.stdout.write(signed_text(zone, soa, rrsets, str(args.dir)))
        return 0
    sys.stdout.write(export_text(content, lbs, str(args.dir)))
    return 0


def run_keys(args: argparse.Namespace) -> int:
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
                    print(f"{zone}: {new.role} {new.tag} signs from "
                          f"{time.strftime('%H:%M:%S', time.localtime(new.activate))}")  # fmt: skip
                else:
                    print(f"{zone}: new {new.role} {new.tag} published; give the parent its DS "
                          f"(below, and in CDS), then: dnsd keys roll {zone} --ksk --ds-seen")  # fmt: skip
            else:
                new = roll(state, zone, dnskey_ttl, max_ttl, time.time())
                print(f"rolling the ZSK of {zone}: {new.tag} published now, signing from "
                      f"{time.strftime('%H:%M:%S', time.localtime(new.activate))}")  # fmt: skip
        keys = load(state, zone, time.time())
    except (OSError, ValueError, KeyError, ConfigError) as exc:
        print(f"{state}: {exc}", file=sys.stderr)
        return 1
    if not keys.keys:
        print(f"{zone}: no keys in {state} (dnsd serve makes them at its first start)",
              file=sys.stderr)  # fmt: skip
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


def run_import(args: argparse.Namespace) -> int:
    """`dnsd import FILE`: write ZONE.yaml into --out (never over an existing file)."""
    from dnsd.config.zonefile import ZoneFileError, read_zone_file
    from dnsd.xfr.zonetext import import_yaml, origin_of

    path = Path(args.file).resolve()
    try:
        origin = origin_of(path, path.read_text(encoding="utf-8"))
        records = read_zone_file(path, origin, path.parent, 3600)
    except ZoneFileError as exc:
        where = f"{exc.file}:{exc.line}" if exc.line else exc.file
        print(f"{where}: {exc.message}", file=sys.stderr)
        return 1
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{path}: cannot read: {exc}", file=sys.stderr)
        return 1
    text, warnings = import_yaml(origin, records, str(path))
    for warning in warnings:
        print(f"{path}: warning: {warning}", file=sys.stderr)
    out = Path(args.out) / f"{origin.rstrip('.') or 'root'}.yaml"
    if out.exists():
        print(f"{out}: exists; not overwritten", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return 0


def subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = action.choices[command]
    return found


def apply_server_file(
    parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]
) -> dict[str, str] | None:
    """`--config FILE` under the flags given (dnsd.serverfile); where each setting came
    from, or None after printing the file's problems."""
    from dnsd.serverfile import explicit_flags, merge, read

    command = subparser(parser, args.command)
    rest = argv[argv.index(args.command) + 1 :]
    values: dict[str, object] = {}
    if args.config:
        values, reasons = read(Path(args.config), command)
        if reasons:
            for reason in reasons:
                print(reason, file=sys.stderr)
            return None
    explicit = explicit_flags(command, rest)
    sources = merge(args, explicit, values)
    if args.config and args.command == "serve":  # SIGHUP and the reload API read it again
        from dnsd.serverfile_reload import ServerFile

        args.server_file = ServerFile(Path(args.config), command, explicit, values)
    return sources


def show_config(args: argparse.Namespace, sources: dict[str, str]) -> int:
    """`dnsd config show`: every serve setting, its effective value and where it came from."""
    from dnsd.admin.webhooks import redacted_url
    from dnsd.cluster.connection import redacted as redacted_redis

    for key in sorted(sources):
        if key in ("command", "action", "config", "follow_fd"):
            continue
        value = getattr(args, key)
        if key == "tokens":  # names and scopes; the hashes stay out of sight
            value = [f"{token.name} ({token.scope})" for token in value]
        if key == "webhooks":  # the secrets (and the secret in a URL's path) stay out of sight
            value = [f"{redacted_url(hook.url)} {sorted(hook.events)}" for hook in value]
        if key == "redis" and value:  # its password stays out of sight
            value = redacted_redis(value)
        if key == "listen" and value:
            value = [f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in value]
        print(f"{key} = {value!r}  ({sources[key]})")
    token = "set" if admin_token_from_environment() else "not set"
    print(f"admin_token = {token}  (environment DNSD_ADMIN_TOKEN or DNSD_ADMIN_TOKEN_FILE)")
    if args.config:
        print(f"# server file: {args.config}")
    return 0


def run_explain(args: argparse.Namespace) -> int:
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


def loop_factory(choice: str):
    """uvloop when asked for, or when installed and `auto`; else the standard loop."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise SystemExit("--event-loop uvloop: uvloop is not installed") from None
        return None
    return uvloop.new_event_loop


def worker_arguments(args: argparse.Namespace) -> list[str]:
    """A worker's `dnsd` command line: this one's serving options, no admin API, the state
    directory only to read the cookie key (the main process adds --listen with the bound
    ports and --follow-fd)."""
    argv = ["serve", args.dir, "--admin", "off", "--log-level", args.log_level,
            "--log-format", args.log_format, "--rrl-rate", str(args.rrl_rate),
            "--rrl-slip", str(args.rrl_slip), "--event-loop", args.event_loop,
            "--udp-loop", args.udp_loop, "--serving-loop", args.serving_loop,
            "--query-log-sample", str(args.query_log_sample),
            "--state-dir", args.state_dir]  # fmt: skip
    for flag, value in (("--geoip", args.geoip), ("--pop-region", args.pop_region),
                        ("--node", args.node)):  # fmt: skip
        if value:
            argv += [flag, value]
    if args.no_answer_cache:
        argv.append("--no-answer-cache")
    for networks in args.proxy_protocol_from or ():
        argv += ["--proxy-protocol-from", ",".join(map(str, networks))]
    return argv


def run_serve(args: argparse.Namespace) -> int:

    from dnsd.logsetup import setup_logging
    from dnsd.server import ServerOptions, serve

    setup_logging(args.log_level, args.log_format)
    admin = None if args.admin == "off" else parse_listen(args.admin)
    if not 0.0 <= args.query_log_sample <= 1.0:
        print("--query-log-sample: a share from 0 to 1", file=sys.stderr)
        return 2
    from dnsd.cluster.seal import read_key
    from dnsd.cookie_key import load_cookie_key
    from dnsd.cookies import ServerCookies
    from dnsd.geo.regions import REGIONS
    from dnsd.net.rrl import RrlSettings
    from dnsd.snapshot import NodeSettings

    if args.pop_region and args.pop_region not in REGIONS:
        print(
            f"--pop-region: unknown region {args.pop_region!r}: one of {' '.join(REGIONS)}",
            file=sys.stderr,
        )
        return 2
    if args.redis and not (args.node and args.pop_region):
        print(
            "--redis needs --node NAME and --pop-region CODE (each node probes as its region)",
            file=sys.stderr,
        )
        return 2
    redis_key = None
    if args.redis and args.redis_key_file:
        try:
            redis_key = read_key(args.redis_key_file)
        except (OSError, ValueError) as exc:
            print(f"--redis-key-file: {exc}", file=sys.stderr)
            return 2
    elif args.redis and not args.redis_insecure:
        print(
            "--redis needs --redis-key-file FILE (the cluster key that seals health messages);"
            " --redis-insecure shares health without one",
            file=sys.stderr,
        )
        return 2
    if args.redis:
        from dnsd.cluster.connection import RedisTarget

        try:
            RedisTarget(args.redis, args.redis_ca_file)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.redis_ca_file and not Path(args.redis_ca_file).is_file():
            print(f"--redis-ca-file: {args.redis_ca_file}: no such file", file=sys.stderr)
            return 2
    if not 1 <= args.workers <= 64:
        print("--workers: from 1 to 64", file=sys.stderr)
        return 2
    from dnsd.net.dnstap import settings_from

    try:
        dnstap = settings_from(args.dnstap_socket, args.dnstap_file, args.dnstap_identity,
                               args.dnstap_sample, getattr(args, "dnstap_messages", None))  # fmt: skip
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if dnstap.enabled and args.workers > 1:
        print("dnstap: not with --workers above 1 (the workers' queries would not be logged)",
              file=sys.stderr)  # fmt: skip
        return 2
    worker = args.follow_fd is not None
    listen = tuple(args.listen or [parse_listen(DEFAULT_LISTEN)])
    try:  # a worker reads the key its main process made
        cookie_key = load_cookie_key(Path(args.state_dir), create=not worker)
    except (OSError, ValueError) as exc:
        print(f"--state-dir: cannot read or create the cookie key: {exc}", file=sys.stderr)
        return 2
    options = ServerOptions(
        config_dir=Path(args.dir),
        listen=listen,
        geoip=Path(args.geoip) if args.geoip else None,
        node=NodeSettings(
            name=args.node, pop_region=args.pop_region, cookies=ServerCookies(cookie_key)
        ),
        state_dir=None if worker else Path(args.state_dir),  # a worker keeps nothing
        key_dir=Path(args.state_dir),
        create_keys=not worker,
        admin=None if worker else admin,
        admin_token=admin_token_from_environment(),
        tokens=tuple(getattr(args, "tokens", ())),
        webhooks=tuple(getattr(args, "webhooks", ())),
        query_log_sample=args.query_log_sample,
        reuse_port=args.reuse_port or args.workers > 1 or worker,
        rrl=RrlSettings(rate=max(0.0, args.rrl_rate), slip=max(0, args.rrl_slip)),
        redis_url=args.redis,
        redis_max_age_s=args.redis_max_age,
        redis_key=redis_key,
        redis_ca_file=args.redis_ca_file,
        cluster_nodes=frozenset(n.strip() for n in args.cluster_nodes.split(",") if n.strip())
        if args.cluster_nodes
        else None,
        answer_cache=not args.no_answer_cache,
        udp_loop=args.udp_loop,
        serving_loop=args.serving_loop,
        workers=args.workers,
        worker_argv=tuple(worker_arguments(args)),
        follow_fd=args.follow_fd,
        server_file=getattr(args, "server_file", None),
        proxy_protocol_from=tuple(n for ns in args.proxy_protocol_from or () for n in ns),
        dnstap=dnstap,
    )
    try:
        with asyncio.Runner(loop_factory=loop_factory(args.event_loop)) as runner:
            return runner.run(serve(options))
    except OSError as exc:
        logging.getLogger("dnsd").error("cannot serve: %s", exc)
        return 1
