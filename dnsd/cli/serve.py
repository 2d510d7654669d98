"""`dnsd serve`: answer the zones over UDP and TCP (docs/operations.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from dnsd.admin.token_env import admin_token_from_environment
from dnsd.cli.flags import DEFAULT_LISTEN, add_serve_arguments, apply_server_file, parse_listen
from dnsd.cli.invocation import Invocation


def command(call: Invocation) -> int:
    if apply_server_file(call.parser, call.args, call.argv) is None:
        return 2
    return run(call.args)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="serve the zones in DIR over UDP and TCP")
    add_serve_arguments(serve)


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
    return argv


def run(args: argparse.Namespace) -> int:

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
    )
    try:
        with asyncio.Runner(loop_factory=loop_factory(args.event_loop)) as runner:
            return runner.run(serve(options))
    except OSError as exc:
        logging.getLogger("dnsd").error("cannot serve: %s", exc)
        return 1
