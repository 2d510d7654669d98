"""Helpers for health tests: configs with monitored loopback backends, and a recorder that
captures every probe result together with the published verdict right after it."""

from __future__ import annotations

import asyncio
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dnsd.health.store import HealthStore

HEADER = """\
zone: h.test
soa: {mname: ns1.h.test., rname: h.h.test.}
records:
  "@": {NS: ns1.h.test.}
  ns1: {A: 192.0.2.1}
  www: {lb: www}
"""


def write_config(
    directory: Path, monitor: str, backends: list[tuple[str, int]], extra: str = ""
) -> Path:
    """One pool `p` of loopback backends (name, port) checked by monitor `m` (YAML text)."""
    lines = "\n".join(f"      - {{name: {n}, address: 127.0.0.1, port: {p}}}" for n, p in backends)
    text = (
        HEADER
        + "monitors:\n  m:\n"
        + textwrap.indent(textwrap.dedent(monitor).strip(), "    ")
        + "\n"
    )
    text += f"pools:\n  p:\n    monitor: m\n    backends:\n{lines}\n"
    text += "load_balancers:\n  www: {default_pools: [p]}\n" + extra
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "h.test.yaml").write_text(text)
    return directory


@dataclass
class Seen:
    source: str
    ok: bool
    error: str | None
    at: float
    healthy: bool  # the published verdict for the backend right after this result


class Recorder:
    def __init__(self, store: HealthStore, pool: str = "p") -> None:
        self.seen: dict[str, list[Seen]] = {}
        original = store.record

        def record(target, source, result, monitor) -> None:  # type: ignore[no-untyped-def]
            original(target, source, result, monitor)
            name = next(
                b.name
                for b in store.config.pools[pool].backends  # type: ignore[union-attr]
                if b.port == target.port
            )
            healthy = store.view.backends[(pool, name)].healthy
            self.seen.setdefault(name, []).append(
                Seen(source, result.ok, result.error, result.at, healthy)
            )

        store.record = record  # type: ignore[method-assign]

    def after(self, name: str, mark: int) -> list[Seen]:
        return self.seen.get(name, [])[mark:]


async def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)
