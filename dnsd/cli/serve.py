"""`dnsd serve`: answer the zones over UDP and TCP (docs/operations.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING

from dnsd.admin.token_env import admin_token_from_environment
from dnsd.cli import test_hooks
from dnsd.cli.flags import add_serve_arguments, apply_server_file, subparser
from dnsd.cli.invocation import Invocation
from dnsd.cli.worker_argv import worker_arguments

if TYPE_CHECKING:
    from dnsd.cli.settings import ServeSettings
    from dnsd.server import ServerOptions
    from dnsd.serverfile_reload import ServerFile


def command(call: Invocation) -> int:
    if apply_server_file(call.parser, call.args, call.argv) is None:
        return 2
    return run(subparser(call.parser, "serve"), call.args)


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


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """`parser`: serve's own (the workers' command line is derived from it)."""
    from dnsd.cli.settings import SettingsError, serve_settings
    from dnsd.logsetup import setup_logging
    from dnsd.process_tools import keep_big_blocks_apart

    keep_big_blocks_apart()  # before any thread: a loaded config's memory stays compact
    setup_logging(args.log_level, args.log_format)
    test_hooks.apply(args)
    try:  # the judge `dnsd check --config` asks too
        settings = serve_settings(args)
    except SettingsError as exc:
        for message in exc.messages:
            print(message, file=sys.stderr)
        return 2
    return serve_with(
        settings, tuple(worker_arguments(parser, args)), getattr(args, "server_file", None)
    )


def serve_with(
    settings: ServeSettings, worker_argv: tuple[str, ...], server_file: ServerFile | None
) -> int:
    from dnsd.cookie_key import load_cookie_key
    from dnsd.cookies import ServerCookies
    from dnsd.server import ServerOptions
    from dnsd.snapshot import NodeSettings

    worker = settings.worker
    try:  # a worker reads the key its main process made
        cookie_key = load_cookie_key(settings.state_dir, create=not worker)
    except (OSError, ValueError) as exc:
        print(f"--state-dir: cannot read or create the cookie key: {exc}", file=sys.stderr)
        return 2
    options = ServerOptions(
        config_dir=settings.config_dir,
        listen=settings.listen,
        geoip=settings.geoip,
        node=NodeSettings(
            name=settings.node, pop_region=settings.pop_region, cookies=ServerCookies(cookie_key)
        ),
        state_dir=None if worker else settings.state_dir,  # a worker keeps nothing
        key_dir=settings.state_dir,
        create_keys=not worker,
        admin=None if worker else settings.admin,
        admin_token=admin_token_from_environment(),
        tokens=settings.tokens,
        webhooks=settings.webhooks,
        query_log_sample=settings.query_log_sample,
        reuse_port=settings.reuse_port,
        rrl=settings.rrl,
        redis_url=settings.redis_url,
        redis_max_age_s=settings.redis_max_age_s,
        redis_key=settings.redis_key,
        redis_ca_file=settings.redis_ca_file,
        cluster_nodes=settings.cluster_nodes,
        answer_cache=settings.answer_cache,
        udp_loop=settings.udp_loop,
        serving_loop=settings.serving_loop,
        workers=settings.workers,
        worker_argv=worker_argv,
        follow_fd=settings.follow_fd,
        server_file=server_file,
        proxy_protocol_from=settings.proxy_protocol_from,
        dnstap=settings.dnstap,
    )
    try:
        with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
            return runner.run(serve(options))
    except OSError as exc:
        logging.getLogger("dnsd").error("cannot serve: %s", exc)
        return 1


async def serve(options: ServerOptions) -> int:
    """The process's life: the first load, the server, a reload on SIGHUP, a stop on SIGTERM."""
    import signal

    from dnsd.config.loader import ParseCache
    from dnsd.process_tools import release_free_memory
    from dnsd.serve.first_load import load_first
    from dnsd.server import DnsServer

    log = logging.getLogger("dnsd.server")  # one logger for every part of serving
    cache = ParseCache()  # the reloads parse only the files that changed since
    snapshot = await load_first(
        options.config_dir,
        options.geoip,
        options.node,
        options.key_dir,
        options.create_keys,
        options.follow_fd is None,
        cache,
    )
    if snapshot is None:
        return 1
    server = DnsServer(options, snapshot, cache)
    zones = len(snapshot.zones)
    # The loaded snapshot is served with its serials (dnsd.xfr.versions), a new object
    # whose zones have their own tables: this one, kept for the process's life, would
    # keep its tables too (5 MiB per 100,000 names).
    del snapshot
    await server.start()
    release_free_memory()  # what starting (serials, the transfer digests) freed too
    stop = server.stop_requested
    assert stop is not None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(server.reload()))

    def request_stop() -> None:
        server.loads_cancelled.set()
        stop.set()

    loop.add_signal_handler(signal.SIGTERM, request_stop)
    loop.add_signal_handler(signal.SIGINT, request_stop)
    log.info("serving %d zone(s) from %s", zones, options.config_dir)
    await stop.wait()
    log.info("stopping")
    await server.stop()
    return 0
