"""`dnsd serve`'s settings, checked in one place: the flags and the server file
(`--config FILE`, dnsd.serverfile) make one `ServeSettings`, and `serve_settings()` is the
only judge of them. `dnsd serve` refuses to start on what it rejects, and `dnsd check
--config FILE` prints the same messages, so a server file that passes the check does not
fail at the start for a bad setting.

The judgement reads files (the cluster key) and the state directory but changes nothing:
the check must leave no cookie key behind, and a worker must not create one.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import math
import os
from dataclasses import dataclass
from pathlib import Path

from dnsd.admin.gate import Token
from dnsd.admin.webhooks import Webhook
from dnsd.cli.flags import DEFAULT_LISTEN, parse_listen
from dnsd.cookie_key import FILE as COOKIE_KEY_FILE
from dnsd.cookie_key import load_cookie_key
from dnsd.net.dnstap import DnstapSettings, settings_from
from dnsd.net.rrl import RrlSettings

MAX_WORKERS = 64


class SettingsError(ValueError):
    """The settings `dnsd serve` refuses, one message each (flag-named, as the flags are)."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = tuple(messages)


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """What `dnsd serve` runs with, every value checked."""

    config_dir: Path
    listen: tuple[tuple[str, int], ...]
    admin: tuple[str, int] | None  # None: `--admin off`
    geoip: Path | None  # None: the embedded database
    node: str | None
    pop_region: str | None
    state_dir: Path
    log_level: str
    log_format: str
    rrl: RrlSettings
    redis_url: str | None
    redis_key: bytes | None  # the cluster key; None with --redis-insecure (or no --redis)
    redis_ca_file: str | None
    redis_max_age_s: float
    cluster_nodes: frozenset[str] | None  # None: any node may speak on the bus
    answer_cache: bool
    event_loop: str
    udp_loop: str
    serving_loop: str
    reuse_port: bool
    workers: int
    follow_fd: int | None  # set: this process is a worker
    query_log_sample: float
    tokens: tuple[Token, ...]
    webhooks: tuple[Webhook, ...]
    proxy_protocol_from: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    dnstap: DnstapSettings

    @property
    def worker(self) -> bool:
        return self.follow_fd is not None


def serve_settings(args: argparse.Namespace) -> ServeSettings:
    """The settings in `args` (the serve flags with the server file merged under them);
    SettingsError naming every setting `dnsd serve` would refuse."""
    problems: list[str] = []
    admin = _admin(args.admin, problems)
    if not 0.0 <= args.query_log_sample <= 1.0:
        problems.append("--query-log-sample: a share from 0 to 1")
    if not math.isfinite(args.rrl_rate):
        problems.append("--rrl-rate: a finite number of replies per second")
    _regions(args, problems)
    redis_key = _redis(args, problems)
    if not 1 <= args.workers <= MAX_WORKERS:
        problems.append(f"--workers: from 1 to {MAX_WORKERS}")
    worker = args.follow_fd is not None
    state_problem = _state_dir_problem(Path(args.state_dir), create=not worker)
    if state_problem:
        problems.append(f"--state-dir: cannot read or create the cookie key: {state_problem}")
    _loops(args, problems)
    dnstap = DnstapSettings()
    try:
        dnstap = settings_from(
            args.dnstap_socket,
            args.dnstap_file,
            args.dnstap_identity,
            args.dnstap_sample,
            getattr(args, "dnstap_messages", None),
        )
    except ValueError as exc:
        problems.append(str(exc))
    if dnstap.enabled and args.workers > 1:
        problems.append(
            "dnstap: not with --workers above 1 (the workers' queries would not be logged)"
        )
    if problems:
        raise SettingsError(problems)
    return ServeSettings(
        config_dir=Path(args.dir),
        listen=tuple(args.listen or [parse_listen(DEFAULT_LISTEN)]),
        admin=admin,
        geoip=Path(args.geoip) if args.geoip else None,
        node=args.node,
        pop_region=args.pop_region,
        state_dir=Path(args.state_dir),
        log_level=args.log_level,
        log_format=args.log_format,
        rrl=RrlSettings(rate=max(0.0, args.rrl_rate), slip=max(0, args.rrl_slip)),
        redis_url=args.redis,
        redis_key=redis_key,
        redis_ca_file=args.redis_ca_file,
        redis_max_age_s=args.redis_max_age,
        cluster_nodes=frozenset(n.strip() for n in args.cluster_nodes.split(",") if n.strip())
        if args.cluster_nodes
        else None,
        answer_cache=not args.no_answer_cache,
        event_loop=args.event_loop,
        udp_loop=args.udp_loop,
        serving_loop=args.serving_loop,
        reuse_port=args.reuse_port or args.workers > 1 or worker,
        workers=args.workers,
        follow_fd=args.follow_fd,
        query_log_sample=args.query_log_sample,
        tokens=tuple(getattr(args, "tokens", ())),
        webhooks=tuple(getattr(args, "webhooks", ())),
        proxy_protocol_from=tuple(n for ns in args.proxy_protocol_from or () for n in ns),
        dnstap=dnstap,
    )


def _admin(value: str, problems: list[str]) -> tuple[str, int] | None:
    if value == "off":
        return None
    try:
        return parse_listen(value)
    except argparse.ArgumentTypeError as exc:
        problems.append(f"--admin: {exc} (or off)")
        return None


def _regions(args: argparse.Namespace, problems: list[str]) -> None:
    from dnsd.geo.regions import REGIONS

    if args.pop_region and args.pop_region not in REGIONS:
        problems.append(
            f"--pop-region: unknown region {args.pop_region!r}: one of {' '.join(REGIONS)}"
        )


def _redis(args: argparse.Namespace, problems: list[str]) -> bytes | None:
    """The cluster key (None without one); the Redis settings' problems added."""
    if not args.redis:
        return None
    from dnsd.cluster.connection import RedisTarget
    from dnsd.cluster.seal import read_key

    if not (args.node and args.pop_region):
        problems.append(
            "--redis needs --node NAME and --pop-region CODE (each node probes as its region)"
        )
    key = None
    if args.redis_key_file:
        try:
            key = read_key(args.redis_key_file)
        except (OSError, ValueError) as exc:
            problems.append(f"--redis-key-file: {exc}")
    elif not args.redis_insecure:
        problems.append(
            "--redis needs --redis-key-file FILE (the cluster key that seals health messages);"
            " --redis-insecure shares health without one"
        )
    try:
        RedisTarget(args.redis, args.redis_ca_file)
    except ValueError as exc:
        problems.append(str(exc))
    else:
        if args.redis_ca_file and not Path(args.redis_ca_file).is_file():
            problems.append(f"--redis-ca-file: {args.redis_ca_file}: no such file")
    return key


def _state_dir_problem(state_dir: Path, create: bool) -> str | None:
    """Why the cookie key could be neither read nor made there (None: it can), without
    making it: the first start (or `dnsd serve` itself, just after) makes it."""
    try:
        load_cookie_key(state_dir, create=False)
        return None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        if not create:  # a worker reads the key its main process made
            return str(exc)
    existing = state_dir / COOKIE_KEY_FILE
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # the part of the path that is there already
    if existing.name == COOKIE_KEY_FILE and existing.parent == state_dir:
        if not existing.is_file():
            return f"{existing}: not a regular file"
        existing = state_dir
    if not existing.is_dir():
        return f"{existing}: not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing}: not writable"
    return None


def _loops(args: argparse.Namespace, problems: list[str]) -> None:
    if args.event_loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        problems.append("--event-loop uvloop: uvloop is not installed")
    if args.serving_loop == "compiled":
        from dnsd.net.udp_thread import compiled_available

        if not compiled_available():
            problems.append("--serving-loop compiled: dnsd._fastloop was not built")
