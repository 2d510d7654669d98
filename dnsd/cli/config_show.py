"""`dnsd config show`: the effective server settings and where each came from."""

from __future__ import annotations

import argparse

from dnsd.admin.token_env import admin_token_from_environment
from dnsd.cli.flags import add_serve_arguments, apply_server_file
from dnsd.cli.invocation import Invocation


def command(call: Invocation) -> int:
    sources = apply_server_file(call.parser, call.args, call.argv)
    if sources is None:
        return 2
    return show(call.args, sources)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = sub.add_parser("config", help="config show: the effective server settings")
    config.add_argument("action", choices=["show"])
    add_serve_arguments(config)


def show(args: argparse.Namespace, sources: dict[str, str]) -> int:
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
