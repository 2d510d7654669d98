"""A worker's `dnsd serve` command line (`--workers N`, dnsd.workers), derived from the
serve parser and the parsed settings: every serve setting passes to the workers with the
value the main process runs with (the server file's values included, as flags), except
the few named here with why. A flag added to `dnsd serve` reaches the workers without
anyone remembering to add it here."""

from __future__ import annotations

import argparse
import ipaddress

IPNetwork = (ipaddress.IPv4Network, ipaddress.IPv6Network)

MAIN_PROCESS_ONLY = frozenset(
    {
        "help",
        "listen",  # the main process adds --listen with the ports it bound
        "follow_fd",  # the main process adds the worker's pipe
        "workers",  # a worker is one process
        "reuse_port",  # a worker always binds with SO_REUSEPORT
        "config",  # the file's values come as flags; reloads come on the pipe
        # Only the main process speaks on the cluster bus; workers follow its views.
        "redis",
        "redis_ca_file",
        "redis_key_file",
        "redis_insecure",
        "redis_max_age",
        "cluster_nodes",
    }
)
WORKER_VALUES = {"admin": "off"}  # the main process serves the admin API for all


def worker_arguments(serve: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """`serve DIR --flag value …`: what parses back (with `serve`) to this process's
    settings, but for those above."""
    positional: list[str] = []
    flags: list[str] = []
    for action in serve._actions:
        if action.dest in MAIN_PROCESS_ONLY:
            continue
        value = WORKER_VALUES.get(action.dest, getattr(args, action.dest))
        if not action.option_strings:
            positional.append(_text(action, value))
            continue
        flag = next(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._StoreTrueAction):
            if value:
                flags.append(flag)
        elif isinstance(action, argparse._AppendAction):
            for item in value or ():
                flags += [flag, _text(action, item)]
        elif value is not None:
            flags += [flag, _text(action, value)]
    return ["serve", *positional, *flags]


def _text(action: argparse.Action, value: object) -> str:
    """The value as its flag takes it; refused for a value that would not parse back."""
    if isinstance(value, tuple | list) and value and all(isinstance(v, IPNetwork) for v in value):
        return ",".join(map(str, value))  # --proxy-protocol-from CIDR[,CIDR...]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TypeError(f"{action.dest}: cannot pass {value!r} to a worker's command line")
    return str(value)  # repr-exact for floats: the worker parses back the same number
