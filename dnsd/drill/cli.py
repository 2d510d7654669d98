"""`dnsd drill` and `dnsd demo`."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from dnsd.drill.backend import DemoBackend
from dnsd.drill.config import DEFAULT_TIMING, ZONE, Timing, demo_config
from dnsd.drill.control import DemoBackends
from dnsd.drill.environment import BoxEnvironment, Environment, RemoteEnvironment
from dnsd.drill.plots import can_plot
from dnsd.drill.report import plot, table, write_json
from dnsd.drill.runner import SCENARIOS, Drill, DrillResult


def _addr(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


async def _drill(args: argparse.Namespace) -> int:
    env: Environment
    results: list[DrillResult] = []
    if args.server:
        env = RemoteEnvironment(
            args.server,
            os.environ.get("DNSD_ADMIN_TOKEN"),
            _addr(args.dns or "127.0.0.1:5353"),
            _addr(args.resolver[0]) if args.resolver else None,
            args.control,
            DEFAULT_TIMING,
        )
    else:
        print("starting demo backends, dnsd and unbound on loopback…", file=sys.stderr)
        env = BoxEnvironment(with_resolver=not args.no_resolver)
    try:
        if isinstance(env, BoxEnvironment):
            await env.start()
        scenarios = SCENARIOS if args.scenario == "all" else (args.scenario,)
        drill = Drill(env, progress=not args.quiet and sys.stderr.isatty())
        for scenario in scenarios:
            results.append(await drill.run(scenario))
    finally:
        await env.close()
    print(table(results))
    if args.json:
        write_json(results, Path(args.json))
    if args.plot and can_plot("--plot"):
        for result, path in zip(results, plot_paths(Path(args.plot), results), strict=True):
            plot(result, path)
    return 0 if all(r.passed for r in results) else 1


def plot_paths(target: Path, results: list[DrillResult]) -> list[Path]:
    """One picture per scenario: FILE.png for one; FILE-SCENARIO.png (or DIR/SCENARIO.png
    when the target is a directory) for several."""
    if len(results) == 1 and not target.is_dir():
        return [target]
    if target.suffix.lower() == ".png":
        return [target.with_name(f"{target.stem}-{r.scenario}.png") for r in results]
    target.mkdir(parents=True, exist_ok=True)
    return [target / f"{r.scenario}.png" for r in results]


def run_drill(args: argparse.Namespace) -> int:
    if args.scenario == "run":
        from dnsd.drill.plan_cli import run_plan_command

        return run_plan_command(args)
    if args.plan is not None:
        print(
            f"dnsd drill: {args.scenario} takes no plan (dnsd drill run PLAN.yaml)", file=sys.stderr
        )
        return 2
    try:
        return asyncio.run(_drill(args))
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"dnsd drill: {exc}", file=sys.stderr)
        return 2


async def _demo(args: argparse.Namespace) -> int:
    import tempfile

    from dnsd.geo.database import GeoDatabase
    from dnsd.loading import load_snapshot
    from dnsd.logsetup import setup_logging
    from dnsd.server import DnsServer, ServerOptions
    from dnsd.snapshot import NodeSettings

    setup_logging("warning", "text")
    token = os.environ.get("DNSD_ADMIN_TOKEN", "demo")
    backends = await DemoBackends().start()
    control_host, control_port = _addr(args.control)
    await backends.serve_control(control_host, control_port)
    directory = Path(tempfile.mkdtemp(prefix="dnsd-demo-"))
    (directory / "zones").mkdir()
    (directory / "zones" / "demo.yaml").write_text(demo_config(backends.ports, DEFAULT_TIMING))
    node = NodeSettings(name="demo", pop_region="WEU")
    options = ServerOptions(
        config_dir=directory / "zones",
        listen=(_addr(args.listen),),
        admin=_addr(args.admin),
        admin_token=token,
        state_dir=directory / "state",
        node=node,
    )
    server = DnsServer(options, load_snapshot(options.config_dir, 1, GeoDatabase(), node))
    try:
        await server.start()
    except OSError as exc:
        await backends.stop()
        print(
            f"dnsd demo: cannot listen: {exc} (is another dnsd running? try --listen/--admin)",
            file=sys.stderr,
        )
        return 1
    host, port = server.bound[0]
    admin = f"http://{args.admin}"
    control = f"http://{args.control}"
    print(
        _DEMO_TEXT.format(
            port=port,
            host=host,
            admin=admin,
            control=control,
            token=token,
            zone=ZONE,
            dir=directory / "zones",
            timing=DEFAULT_TIMING,
        )
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("\nstopping the demo", file=sys.stderr)
    await server.stop()
    await backends.stop()
    return 0


_DEMO_TEXT = """\
dnsd demo is running (Ctrl-C stops everything).

  dnsd          {host}:{port} (UDP+TCP), config {dir}
  admin API     {admin}/  (status page; token: {token})
  backends      demo backends on 127.0.0.11-62, control at {control}/backends
  timing        TTL {timing.ttl_s}s, probes every {timing.interval_s}s, down after {timing.unhealthy_threshold} failures

Try:
  dig @{host} -p {port} +short www.{zone}          # primary pool: 127.0.0.11 127.0.0.12
  curl -s -X POST -d '{{"mode": "503"}}' {control}/backends/p1
  curl -s -X POST -d '{{"mode": "503"}}' {control}/backends/p2
  dig @{host} -p {port} +short www.{zone}          # about a second later: secondary 127.0.0.21 127.0.0.22
  curl -s -X POST -d '{{"mode": "ok"}}' {control}/backends/p1
  dnsd explain www.{zone} --server {admin}
  curl -s -X PUT -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' -d '{{"trickle_ratio": 1.0}}' {admin}/api/v1/overrides/load_balancers/www
  DNSD_ADMIN_TOKEN={token} dnsd drill primary-down --server {admin} --control {control} --dns {host}:{port} --plot drill.png

Other names: geo.{zone} (geo steering; this node is in WEU), zonal.{zone} (SPILL_CROSS_ZONE),
stay.{zone} (STAY_WITHIN_ZONE), trickle.{zone} (10% to the backup). Backend modes: ok, 503,
refused, blackhole, slow.
"""


async def _backends(args: argparse.Namespace) -> int:
    group = DemoBackends()
    for spec in args.backends:
        name, _, address = spec.partition("=")
        host, port = _addr(address)
        group.backends[name] = await DemoBackend(
            name, host=host, port=port, control_port=None
        ).start()
    await group.serve_control(*_addr(args.control))
    for name, backend in group.backends.items():
        print(f"backend {name} on {backend.host}:{backend.port}", flush=True)
    print(f'control on {args.control} (POST /backends/NAME {{"mode": "503"}})', flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await group.stop()
    return 0


def run_backends(args: argparse.Namespace) -> int:
    return asyncio.run(_backends(args))


def run_demo(args: argparse.Namespace) -> int:
    return asyncio.run(_demo(args))


__all__ = ["Timing", "run_backends", "run_demo", "run_drill"]
