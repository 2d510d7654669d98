"""Run a drill plan against a running dnsd (docs/drills.md "Drill plans").

Per step: inject the fault (an admin-API override with an expiry, or the plan's command),
then poll every expectation's name — directly at dnsd and through each resolver, as the
plan's vantage point (ECS) — every 100 ms until the answer is the expected one or its bound
(+ slack) has passed. Every fault is undone on success, failure, Ctrl-C and SIGTERM; an
override outlives a killed drill only until its expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from typing import Any
from urllib.parse import quote

import aiohttp

from dnsd.drill.dnsclient import DnsClient
from dnsd.drill.plan import (
    Bound,
    Expectation,
    Fault,
    LiveConfig,
    MonitorTiming,
    NameInfo,
    Plan,
    Step,
    bound_for,
    check_against,
    expected_addresses,
    fault_for_s,
)
from dnsd.drill.plan_results import ExpectationResult, LaneResult, PlanResult, StepResult
from dnsd.drill.plan_timing import HOLD_S, POLL_S, SLACK_S
from dnsd.errors import Reason
from dnsd.explain import ecs_option

COMMAND_TIMEOUT_S = 60.0


class DrillRefused(Exception):
    """The plan cannot run against this server (exit 2): nothing was changed."""

    def __init__(self, reasons: list[Reason] | list[str]) -> None:
        self.reasons = [str(r) for r in reasons]
        super().__init__("\n".join(self.reasons))


def parse_addr(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class AdminClient:
    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self._session: aiohttp.ClientSession | None = None

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            # no redirects: the token goes to this admin API and nowhere it points to
            async with self._session.request(
                method, self.url + path, json=body, headers=headers, allow_redirects=False
            ) as r:
                return r.status, await r.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise OSError(f"admin API {self.url}: {exc or type(exc).__name__}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


async def read_live(admin: AdminClient, plan: Plan) -> LiveConfig:
    """The running config as the plan needs it: pools and backends, monitors, load
    balancers (status document), and per (name, vantage) the load balancer, TTL and pools
    (explain: the same code path as the answers)."""
    status, doc = await admin.call("GET", "/api/v1/status")
    if status != 200:
        raise OSError(f"admin API GET /api/v1/status: {status}")
    live = LiveConfig(
        pools={p["name"]: {b["name"]: b["address"] for b in p["backends"]} for p in doc["pools"]},
        timing={
            p["name"]: MonitorTiming(**p["monitor_timing"]) if p.get("monitor_timing") else None
            for p in doc["pools"]
        },
        lbs={lb["name"] for lb in doc["load_balancers"]},
        ramps={
            lb["name"]: (float(lb["ramp"]["duration_s"]), int(lb["ramp"]["steps"]))
            for lb in doc["load_balancers"]
            if lb.get("ramp")
        },
    )
    pairs = {(e.name, e.vantage) for s in plan.steps for e in s.expect}
    for name, vantage in sorted(pairs, key=str):
        query = f"/api/v1/explain?name={quote(name)}"
        if vantage is not None:
            query += f"&ecs={quote(plan.vantage[vantage])}"
        code, info = await admin.call("GET", query)
        if code != 200 or not info.get("lb"):
            continue  # check_against names it
        pools = [c["pool"] for c in info.get("candidates", [])]
        pools += [p for p in (info.get("primary"), info.get("backup"), info.get("pool")) if p]
        ttl = info.get("ttl") or 0
        live.names[(name, vantage)] = NameInfo(info["lb"], float(ttl), tuple(dict.fromkeys(pools)))
    return live


class PlanRunner:
    def __init__(
        self,
        plan: Plan,
        admin: AdminClient,
        dns: tuple[str, int],
        resolvers: list[tuple[str, int]],
        progress: bool = False,
    ) -> None:
        self.plan, self.admin, self.dns, self.resolvers = plan, admin, dns, resolvers
        self.progress = progress
        self.live: LiveConfig | None = None
        self.bounds: dict[tuple[int, int], Bound] = {}
        self.fault_for_s = 0.0
        self.active: list[Fault] = []  # injected, not yet restored (in order)
        self.start = time.monotonic()
        self.result = PlanResult(plan)

    # -- before anything changes ------------------------------------------------------------
    async def prepare(self) -> LiveConfig:
        """Read the live config, check the plan against it, compute the bounds; DrillRefused
        (nothing changed) when a name, pool, backend or load balancer does not exist or a
        target the plan faults already carries an override."""
        live = await read_live(self.admin, self.plan)
        reasons = check_against(self.plan, live)
        if reasons:
            raise DrillRefused(reasons)
        self.live = live
        for step in self.plan.steps:
            for i, e in enumerate(step.expect):
                self.bounds[(step.index, i)] = bound_for(e, live)
        ramps_s = sum(
            live.ramps[str(info.lb)][0] + info.ttl_s + SLACK_S
            for step in self.plan.steps
            for e in step.expect
            if e.ramp is not None and (info := live.names[(e.name, e.vantage)]).lb in live.ramps
        )
        self.fault_for_s = fault_for_s(self.plan, self.bounds, ramps_s)
        return live

    async def refuse_overridden_targets(self) -> None:
        status, body = await self.admin.call("GET", "/api/v1/overrides")
        if status != 200:
            raise DrillRefused([f"admin API GET /api/v1/overrides: {status} {body} (token?)"])
        taken = {(o["kind"], o["target"]) for o in body.get("overrides", [])}
        clashes = []
        for step in self.plan.steps:
            f = step.fault
            if f is None or f.kind == "command":
                continue
            kind, target = _override_target(f)
            if (kind, target) in taken:
                clashes.append(
                    f"{self.plan.file}:{f.line}: {kind} {target} already has an override: "
                    "remove it first (a drill would remove it when it restores)"
                )
        if clashes:
            raise DrillRefused(clashes)

    def describe(self) -> str:
        """What the drill would do (--dry-run)."""
        lines = [
            f"plan {self.plan.name!r}: {len(self.plan.steps)} step(s); injected overrides "
            f"expire after {self.fault_for_s:.0f}s unless restored"
        ]
        lanes = ["dnsd " + ":".join(map(str, self.dns))] + [
            f"resolver {h}:{p}" for h, p in self.resolvers
        ]
        lines.append(f"measured at: {', '.join(lanes)} (every {POLL_S * 1000:.0f} ms)")
        for step in self.plan.steps:
            action = (
                f"inject {step.fault.describe()}"
                if step.fault
                else "restore every fault"
                if step.restore
                else "no change"
            )
            lines.append(f"step {step.index}: {step.name} — {action}")
            for i, e in enumerate(step.expect):
                b = self.bounds[(step.index, i)]
                lines.append(f"    expect {e.describe()}: bound {b.seconds:.2f}s = {b.formula}")
                if e.ramp is not None:
                    lines.append("        " + self._ramp_plan(e))
        return "\n".join(lines)

    # -- the drill ----------------------------------------------------------------------------
    async def run(self) -> PlanResult:
        result = self.result = PlanResult(self.plan, names=self._address_names())
        self.start = time.monotonic()
        try:
            for step in self.plan.steps:
                result.steps.append(await self._step(step))
        except asyncio.CancelledError:
            result.interrupted = "interrupted"
            raise
        except (OSError, RuntimeError) as exc:
            result.errors.append(str(exc))
        finally:
            errors = await self.restore_all()
            result.errors.extend(errors)
        return result

    async def _step(self, step: Step) -> StepResult:
        out = StepResult(step, started_at=self.now())
        if self.progress:
            total = len(self.plan.steps)
            print(f"step {step.index}/{total}: {step.name} …", file=sys.stderr, flush=True)
        if step.fault is not None:
            await self._warm(step, out)
            await self._inject(step.fault)
        elif step.restore:
            errors = await self.restore_all()
            if errors:
                raise RuntimeError("; ".join(errors))
        t0 = self.now()
        out.started_at = t0
        tasks = [
            asyncio.create_task(self._expect(step, i, e, t0, out))
            for i, e in enumerate(step.expect)
        ]
        try:
            out.expectations = list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()
        out.finished_at = self.now()
        if self.progress:
            for e in out.expectations:
                print(
                    f"  step {step.index} {'PASS' if e.passed else 'FAIL'} {e.label}"
                    f"{': ' + e.message if e.message else ''}",
                    file=sys.stderr,
                )
        return out

    async def _warm(self, step: Step, out: StepResult) -> None:
        """Ask every expectation's question once through every lane before the fault, as
        clients did all along: resolvers hold the old answer, so the TTL counts."""
        assert self.live is not None
        breaks = self.faulted_addresses([step.fault] if step.fault else [])
        for e in step.expect:
            ecs = ecs_option(self.plan.vantage[e.vantage]) if e.vantage else None
            wanted = expected_addresses(e, self.live)
            for server in [self.dns, *self.resolvers]:
                client = await DnsClient(*server, timeout_s=0.5).open()
                try:
                    answer = await client.query(e.name, self.now(), ecs=ecs)
                finally:
                    client.close()
                note = f"{e.describe()}: already so before the fault"
                got = set(answer.addresses)
                held = got and got <= wanted and not got & breaks and e.pools
                if held and note not in out.notes:
                    out.notes.append(note)

    def _ramp_plan(self, e: Expectation) -> str:
        from dnsd.drill.ramp_watch import query_rate

        assert self.live is not None
        info = self.live.names[(e.name, e.vantage)]
        duration_s, steps = self.live.ramps[str(info.lb)]
        shares = " ".join(f"{k / steps:.0%}" for k in range(1, steps + 1))
        text = (
            f"ramp of {info.lb}: {steps} steps over {duration_s:g}s, shares {shares} to "
            f"{e.ramp}, judged at dnsd ({query_rate(duration_s, steps):.0f} queries/s)"
        )
        if self.resolvers:
            text += (
                f"; through resolvers all by the ramp's end + TTL {info.ttl_s:g}s + {SLACK_S:g}s"
            )
        return text

    def now(self) -> float:
        return time.monotonic() - self.start

    async def _expect(
        self, step: Step, index: int, e: Expectation, t0: float, out: StepResult
    ) -> ExpectationResult:
        assert self.live is not None
        if e.ramp is not None:
            from dnsd.drill.ramp_watch import expect_ramp

            return await expect_ramp(self, step, index, e, t0, out)
        bound = self.bounds[(step.index, index)]
        result = ExpectationResult(step.index, e, bound)
        wanted = expected_addresses(e, self.live)
        avoid = self.faulted_addresses()
        ecs = ecs_option(self.plan.vantage[e.vantage]) if e.vantage else None
        servers = [("dnsd", self.dns)] + [(f"resolver {h}:{p}", (h, p)) for h, p in self.resolvers]
        info = self.live.names.get((e.name, e.vantage))
        ttl_s = info.ttl_s if info is not None else 0.0
        # the latest a holding streak may start (later is a failure anyway) + its hold window
        latest = t0 + bound.seconds + SLACK_S + 1.0

        def fulfils(addrs: tuple[str, ...]) -> bool:
            got = set(addrs)
            if not got or got & avoid:
                return False
            return got <= wanted if e.pools else bool(got & wanted)

        async def lane(name: str, server: tuple[str, int]) -> LaneResult:
            lr = LaneResult(name, hold_s=HOLD_S if name == "dnsd" else ttl_s + HOLD_S)
            client = await DnsClient(*server, timeout_s=0.5).open()
            label = f"{e.name} from {e.vantage or 'here'} @ {name}"
            streak: float | None = None  # when the answers began to fulfil it, without a break
            try:
                tick = 0
                while True:
                    now = self.now()
                    if streak is None and now >= latest:
                        break
                    answer = await client.query(e.name, now, ecs=ecs)
                    out.timeline.append((label, answer))
                    lr.queries += 1
                    lr.lost += answer.lost
                    if answer.lost or not fulfils(answer.addresses):
                        streak = None  # a break: only a later answer can start a streak
                    else:
                        lr.fulfilled += 1
                        if streak is None:
                            streak = answer.at
                    if streak is not None and answer.at - streak >= lr.hold_s:
                        lr.measured_s = streak - t0
                        break
                    tick += 1
                    await asyncio.sleep(max(0.0, t0 + tick * POLL_S - self.now()))
            finally:
                client.close()
            return lr

        result.lanes = list(await asyncio.gather(*(lane(n, s) for n, s in servers)))
        slow = [
            x
            for x in result.lanes
            if x.measured_s is None or x.measured_s > bound.seconds + SLACK_S
        ]
        lost = sum(x.lost for x in result.lanes)
        problems = []
        for x in slow:
            seen = (
                f"after {x.measured_s:.2f}s"
                if x.measured_s is not None
                else f"never held ({x.fulfilled} of {x.queries} answers fulfilled it, none "
                f"followed by {x.hold_s:g}s of answers that did)"
                if x.fulfilled
                else "never"
            )
            problems.append(f"{x.lane}: {seen}, bound {bound.seconds:.2f}s")
        if lost:
            problems.append(f"{lost} queries lost (timeout or SERVFAIL)")
        result.passed = not problems
        result.message = "; ".join(problems)
        return result

    # -- faults -------------------------------------------------------------------------------
    async def _inject(self, fault: Fault) -> None:
        if fault.kind == "command":
            self.active.append(fault)  # restore runs even when the command itself fails
            await self._shell(str(fault.command), "command")
            return
        path, body = _override_request(fault)
        body |= {"reason": f"dnsd drill: {self.plan.name}"[:200], "for": f"{self.fault_for_s:.0f}s"}
        self.active.append(fault)
        status, reply = await self.admin.call("PUT", path, body)
        if status != 200:
            self.active.pop()
            raise RuntimeError(f"admin API PUT {path}: {status} {reply}")

    async def restore_all(self) -> list[str]:
        """Undo every fault still active, the last first; the errors (it goes on after one)."""
        errors: list[str] = []
        while self.active:
            fault = self.active.pop()
            try:
                if fault.kind == "command":
                    await self._shell(str(fault.restore), "restore")
                else:
                    path, _ = _override_request(fault)
                    status, reply = await self.admin.call("DELETE", path)
                    if status not in (200, 404):
                        errors.append(f"admin API DELETE {path}: {status} {reply}")
            except (OSError, RuntimeError) as exc:
                errors.append(str(exc))
        return errors

    async def _shell(self, command: str, what: str) -> None:
        proc = await asyncio.create_subprocess_shell(
            command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout ends its children too
        )
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT_S):
                output, _ = await proc.communicate()
        except TimeoutError:
            # Killing only the shell left a child to apply its fault after the drill had
            # restored and exited: end the whole group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise RuntimeError(
                f"{what} {command!r} ran longer than {COMMAND_TIMEOUT_S:.0f}s"
            ) from None
        if proc.returncode != 0:
            tail = output.decode(errors="replace").strip()[-300:]
            raise RuntimeError(f"{what} {command!r} exited {proc.returncode}: {tail}")

    def faulted_addresses(self, faults: list[Fault] | None = None) -> frozenset[str]:
        """Answers naming a backend the active faults took down never fulfil an expectation."""
        assert self.live is not None
        out: set[str] = set()
        for f in self.active if faults is None else faults:
            refs = list(f.breaks) if f.kind == "command" else []
            if f.kind in ("pool", "backend"):
                refs.append(f"{f.pool}/{f.backend}" if f.kind == "backend" else str(f.pool))
            for ref in refs:
                pool, _, backend = ref.partition("/")
                backends = self.live.pools.get(pool, {})
                out |= {a for b, a in backends.items() if not backend or b == backend}
        return frozenset(out)

    def _address_names(self) -> dict[str, str]:
        if self.live is None:
            return {}
        return {
            address: f"{pool}/{backend}"
            for pool, backends in self.live.pools.items()
            for backend, address in backends.items()
        }


def _override_target(fault: Fault) -> tuple[str, str]:
    if fault.kind == "pool":
        return "pool", str(fault.pool)
    if fault.kind == "backend":
        return "backend", f"{fault.pool}/{fault.backend}"
    return "load_balancer", str(fault.lb)


def _override_request(fault: Fault) -> tuple[str, dict[str, Any]]:
    if fault.kind == "pool":
        return f"/api/v1/overrides/pools/{quote(str(fault.pool))}", {"state": "down"}
    if fault.kind == "backend":
        path = f"/api/v1/overrides/backends/{quote(str(fault.pool))}/{quote(str(fault.backend))}"
        return path, {"state": "down"}
    return f"/api/v1/overrides/load_balancers/{quote(str(fault.lb))}", {
        "trickle_ratio": fault.ratio
    }


__all__ = ["AdminClient", "DrillRefused", "PlanResult", "PlanRunner", "parse_addr"]
