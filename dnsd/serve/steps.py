"""Start and stop steps run one after the other in their named order, and the background
loops some start steps leave running until the server stops."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

# A step: a plain call, or one whose awaitable is awaited before the next step runs.
Step = Callable[[], Awaitable[object] | None]


async def run_steps(steps: dict[str, Step | None]) -> None:
    """Each step in order; None: a step this process does not take."""
    for step in steps.values():
        if step is not None and inspect.isawaitable(done := step()):
            await done


class BackgroundLoops:
    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[None]] = []

    def starting(self, loop: Callable[..., Awaitable[None]], *args: Any) -> Step:
        """A step that starts `loop(*args)` as a task of its own."""
        return lambda: self.start(loop(*args))

    def start(self, loop: Awaitable[None]) -> None:
        self.tasks.append(asyncio.ensure_future(loop))

    def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()
