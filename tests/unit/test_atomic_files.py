"""dnsd.atomic_files: a multi-file write is all or nothing at every point a crash can
stop it (the states a SIGKILL leaves are made here step by step; the integration test
kills real servers), and a file that cannot be replaced leaves every file as it was."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dnsd.atomic_files import (
    JOURNAL,
    LOCK,
    WriteFailed,
    _roll_forward,
    _stage,
    recover,
    write_file,
    write_files,
)

OLD = {"a.yaml": "a: old\n", "b.yaml": "b: old\n", "gone.yaml": "gone: old\n"}
NEW: dict[str, str | None] = {"a.yaml": "a: new\n", "b.yaml": "b: new\n",
                              "c.yaml": "c: new\n", "gone.yaml": None}  # fmt: skip


def make(directory: Path) -> Path:
    for name, text in OLD.items():
        (directory / name).write_text(text)
    return directory


def state(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.glob("*.yaml"))}


def old_state() -> dict[str, str]:
    return dict(OLD)


def new_state() -> dict[str, str]:
    return {name: text for name, text in NEW.items() if text is not None}


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.glob(".*") if p.name != LOCK]


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_write_replaces_adds_and_removes_together(tmp_path: Path) -> None:
    write_files(make(tmp_path), NEW)
    assert state(tmp_path) == new_state() and leftovers(tmp_path) == []


def test_killed_before_the_commit_point_the_old_files_stay(tmp_path: Path) -> None:
    _stage(make(tmp_path), NEW)  # new texts and old links made; no journal yet
    assert leftovers(tmp_path)
    recover(tmp_path)
    assert state(tmp_path) == old_state() and leftovers(tmp_path) == []


def test_killed_while_writing_the_journal_the_old_files_stay(tmp_path: Path) -> None:
    _stage(make(tmp_path), NEW)
    # write_file's temporary journal, the name a SIGKILL left in a CI run
    (tmp_path / f".{JOURNAL}.3d_2fgjq.tmp").write_text('{"files": [')
    recover(tmp_path)
    assert state(tmp_path) == old_state() and leftovers(tmp_path) == []


@pytest.mark.parametrize("renamed", [0, 1, 2, 3, 4])
def test_killed_after_the_commit_point_the_write_is_finished(tmp_path: Path, renamed: int) -> None:
    entries = _stage(make(tmp_path), NEW)
    (tmp_path / JOURNAL).write_text(json.dumps({"files": entries}))
    _roll_forward(tmp_path, entries[:renamed])  # killed after `renamed` of the renames
    recover(tmp_path)
    assert state(tmp_path) == new_state() and leftovers(tmp_path) == []


def test_after_the_commit_point_a_file_that_cannot_be_replaced_rolls_everything_back(
    tmp_path: Path,
) -> None:
    entries = _stage(make(tmp_path), NEW)
    (tmp_path / JOURNAL).write_text(json.dumps({"files": entries}))
    _roll_forward(tmp_path, entries[:1])  # a.yaml is new already
    assert (tmp_path / "a.yaml").read_text() == "a: new\n"
    with immutable(tmp_path / "b.yaml"):
        recover(tmp_path)
    assert state(tmp_path) == old_state()
    recover(tmp_path)  # the link to the file that was immutable goes now
    assert leftovers(tmp_path) == []


def test_a_write_that_cannot_replace_a_file_changes_nothing_and_says_which(
    tmp_path: Path,
) -> None:
    make(tmp_path)
    with immutable(tmp_path / "b.yaml"), pytest.raises(WriteFailed) as failed:
        write_files(tmp_path, NEW)
    assert str(tmp_path / "b.yaml") in str(failed.value)
    assert "nothing changed" in str(failed.value)
    assert state(tmp_path) == old_state() and leftovers(tmp_path) == []


def test_write_file_keeps_the_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    write_file(path, "one\n", mode=0o600)
    write_file(path, b"two\n")
    assert path.read_text() == "two\n" and os.stat(path).st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret"]
