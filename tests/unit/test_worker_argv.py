"""A worker's command line is derived from the serve parser (dnsd.cli.worker_argv): every
serve setting but the main process's own reaches the workers with its value, a flag added
later too, and the command line parses back to the same settings."""

from __future__ import annotations

import argparse

from dnsd.cli import build_parser
from dnsd.cli.flags import subparser
from dnsd.cli.worker_argv import MAIN_PROCESS_ONLY, worker_arguments
from dnsd.net.proxy_protocol import parse_networks


def serve_parser() -> argparse.ArgumentParser:
    return subparser(build_parser(), "serve")


def not_the_default(action: argparse.Action) -> list[str]:
    """Flags giving `action` a value other than its default."""
    if isinstance(action, argparse._StoreTrueAction):
        return [action.option_strings[-1]]
    if action.choices is not None:
        value = next(str(c) for c in action.choices if c != action.default)
    else:
        kinds = {int: "7", float: "0.25", parse_networks: "10.0.0.0/8,::1"}
        value = kinds.get(action.type, "other-value")  # type: ignore[call-overload]
    return [value] if not action.option_strings else [action.option_strings[-1], value]


def test_every_serve_setting_but_the_main_process_own_reaches_the_workers() -> None:
    serve = serve_parser()
    given = [a for a in serve._actions if a.dest not in MAIN_PROCESS_ONLY]
    argv = [arg for action in given for arg in not_the_default(action)]
    main = serve.parse_args(argv)
    worker = serve.parse_args(worker_arguments(serve, main)[1:])
    for action in given:
        expected = "off" if action.dest == "admin" else getattr(main, action.dest)
        assert getattr(worker, action.dest) == expected, action.dest
        assert expected != action.default, action.dest  # the test gave a value of its own


def test_a_flag_added_to_serve_reaches_the_workers_without_a_list_to_edit() -> None:
    serve = serve_parser()
    serve.add_argument("--new-knob", type=float, default=1.0)
    serve.add_argument("--new-switch", action="store_true")
    args = serve.parse_args(["zones", "--new-knob", "0.1", "--new-switch"])
    argv = worker_arguments(serve, args)
    assert argv[:2] == ["serve", "zones"]
    assert argv[argv.index("--new-knob") + 1] == "0.1" and "--new-switch" in argv


def test_the_main_process_own_settings_stay_with_it() -> None:
    serve = serve_parser()
    args = serve.parse_args(
        [
            "zones",
            "--workers",
            "4",
            "--listen",
            "127.0.0.1:0",
            "--redis",
            "redis://h:1/0",
            "--admin",
            "127.0.0.1:9",
        ]
    )
    argv = worker_arguments(serve, args)
    assert argv[argv.index("--admin") + 1] == "off"
    for flag in ("--workers", "--listen", "--redis", "--follow-fd", "--config"):
        assert flag not in argv
