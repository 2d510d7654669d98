"""A drill `command` that times out is ended with all its children: a child must not apply
its fault after the drill has restored and exited."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from dnsd.drill import run_plan


def test_a_timed_out_command_takes_its_children_with_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(run_plan, "COMMAND_TIMEOUT_S", 0.3)
    mark = tmp_path / "applied"
    command = f"(sleep 1; touch {mark}) & sleep 30"
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="ran longer than"):
        asyncio.run(run_plan.PlanRunner._shell(None, command, "apply"))  # type: ignore[arg-type]
    assert time.monotonic() - started < 5
    time.sleep(1.5)  # the child would have applied its fault by now
    assert not mark.exists(), "a child of the timed-out command ran on"
