"""`dnsd drill run PLAN.yaml`: argument handling, signals and outputs around PlanRunner.

Exit 0 when every expectation held, 1 when one did not (or the drill was interrupted:
its faults are restored first), 2 when the plan is invalid or does not fit the running
config (nothing was changed).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import signal
import sys
import urllib.parse
from pathlib import Path

from dnsd.admin_url import admin_url
from dnsd.drill.plan import PlanError, load_plan
from dnsd.drill.plan_report import html_report, junit, plot_steps, table, write_json
from dnsd.drill.plots import can_plot
from dnsd.drill.run_plan import AdminClient, DrillRefused, PlanResult, PlanRunner, parse_addr

DEFAULT_SERVER = "http://127.0.0.1:8053"
DEFAULT_DNS = "127.0.0.1:53"


def run_plan_command(args: argparse.Namespace) -> int:
    if not args.plan:
        print("dnsd drill run: give the plan: dnsd drill run PLAN.yaml", file=sys.stderr)
        return 2
    try:
        text = Path(args.plan).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"dnsd drill run: cannot read {args.plan}: {exc}", file=sys.stderr)
        return 2
    try:
        plan = load_plan(text, args.plan)
    except PlanError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args, plan))
    except DrillRefused as exc:
        print("\n".join(exc.reasons), file=sys.stderr)
        print(
            "dnsd drill run: the plan does not fit the running config: nothing was changed",
            file=sys.stderr,
        )
        return 2
    except OSError as exc:
        print(f"dnsd drill run: {exc}", file=sys.stderr)
        return 2


async def _run(args: argparse.Namespace, plan: object) -> int:
    from dnsd.drill.plan import Plan

    assert isinstance(plan, Plan)
    # The command line wins over the plan; the plan over the defaults.
    try:
        server = args.server or admin_url(plan.server or DEFAULT_SERVER)
    except argparse.ArgumentTypeError as exc:
        print(f"dnsd drill run: the plan's server: {exc}", file=sys.stderr)
        return 2
    if not args.server and not is_local(server):
        # The admin token (DNSD_ADMIN_TOKEN) goes with every request: a plan file, which may
        # come from anyone, must not be able to send it to a host the operator did not name.
        print(
            f"dnsd drill run: {plan.file}: the plan's server {server} is not on this machine: "
            "the admin token goes only to an admin API you name yourself: run it with "
            f"--server {server}\ndnsd drill run: nothing was sent or changed",
            file=sys.stderr,
        )
        return 2
    dns_text = args.dns or plan.dns or DEFAULT_DNS
    resolvers = [parse_addr(r) for r in (args.resolver or plan.resolvers)]
    from dnsd.admin.token_env import admin_token_from_environment  # DNSD_ADMIN_TOKEN or _FILE

    admin = AdminClient(server, admin_token_from_environment())
    runner = PlanRunner(plan, admin, parse_addr(dns_text), resolvers, progress=not args.quiet)
    try:
        await runner.prepare()
        if args.dry_run:
            print(runner.describe())
            print("dry run: the plan fits the running config; nothing was changed")
            return 0
        await runner.refuse_overridden_targets()
        result = await _run_restoring_on_signals(runner)
    finally:
        await admin.close()
    print(table(result))
    _write_outputs(args, result)
    return 0 if result.passed else 1


def is_local(url: str) -> bool:
    """Whether the admin URL is on this machine: `localhost` or a loopback address (names
    are not resolved: what a name resolves to is not the operator's choice alone)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _run_restoring_on_signals(runner: PlanRunner) -> PlanResult:
    """Ctrl-C and SIGTERM cancel the drill; its `finally` restores every fault first."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    caught: list[str] = []

    def stop(name: str) -> None:
        if caught:  # a second Ctrl-C must not cut the restore short
            print(f"{name}: restoring the faults first", file=sys.stderr)
            return
        caught.append(name)
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig.name)
    try:
        return await runner.run()
    except asyncio.CancelledError:
        if not caught:
            raise
        task.uncancel()
        runner.result.interrupted = f"interrupted by {caught[0]}"
        return runner.result
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _write_outputs(args: argparse.Namespace, result: PlanResult) -> None:
    if args.json:
        write_json(result, Path(args.json))
    if args.junit:
        Path(args.junit).write_text(junit(result))
    if args.report:
        Path(args.report).write_text(html_report(result))
    if args.plot and can_plot("--plot"):
        for path in plot_steps(result, Path(args.plot)):
            print(f"wrote {path}", file=sys.stderr)
