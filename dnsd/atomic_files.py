"""Writing files so that a crash at any instant leaves either the old or the new content.

`write_file(path, data)`: one file — a temp file in the same directory, fsync, rename over
the old one, fsync the directory.

`write_files(directory, {name: text or None})`: several files of one directory as one
change, all or nothing, also when the process is killed (SIGKILL, power loss) at any
point. A write-ahead journal in the directory makes it so:

1. each new text goes to `.NAME.dnsd-new` (fsync), and each current file gets a second
   name `.NAME.dnsd-old` (a hard link: the old content, kept whatever happens next);
2. the journal `.dnsd-journal.json` is written atomically: **the commit point**;
3. each `.NAME.dnsd-new` is renamed over NAME (a removal unlinks NAME);
4. the journal goes, then the `.dnsd-old` links.

`recover(directory)` runs before every load (and before every write): a journal found
there is rolled forward (step 3 again: the renames are idempotent), or back with the
`.dnsd-old` links if a file cannot be replaced; without a journal, leftovers of a write
killed before its commit point are removed (the files were never touched). When a
rename fails in a running write, the write is rolled back the same way and raises
WriteFailed: the old files stay, and the message names the file and the reason.
Writers, and recoveries that find work to do, hold an exclusive flock on `.dnsd-lock`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

JOURNAL = ".dnsd-journal.json"
LOCK = ".dnsd-lock"
NEW = ".dnsd-new"
OLD = ".dnsd-old"
TMP = ".tmp"  # write_file's temporary files: .<name>.<random>.tmp


class _Switches:
    # --test-pause-between-renames (dnsd.cli.test_hooks): widens the window of step 3
    pause_between_renames_s = 0.0


SWITCHES = _Switches()


class WriteFailed(Exception):
    """A multi-file write that did not happen: every file is as it was."""


def write_file(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Replace `path` atomically and durably. `mode`: the new file's permissions (default:
    the old file's, else 0644 under the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None and path.exists():
        mode = path.stat().st_mode & 0o777
    fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(path.name), suffix=TMP, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        else:  # mkstemp makes 0600: what open() would have made instead
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_directory(path.parent)


def discard_leftovers(path: Path) -> None:
    """Remove the temporary files a crash inside `write_file(path, ...)` left behind (the
    name is `write_file`'s: this module is the one place that knows it)."""
    for leftover in path.parent.glob(f"{_temporary_prefix(path.name)}*{TMP}"):
        with contextlib.suppress(OSError):
            leftover.unlink()


def _temporary_prefix(name: str) -> str:
    return f".{name}."


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_files(directory: Path, texts: Mapping[str, str | None]) -> None:
    """Replace (text) or remove (None) each named file of `directory`, all or nothing;
    WriteFailed when nothing was changed after all."""
    for name in texts:
        if not _is_name(name):
            raise WriteFailed(f"{name!r}: not a file name of the directory")
    with _locked(directory):
        _recover_locked(directory)
        entries = _stage(directory, texts)
        try:
            write_file(directory / JOURNAL, json.dumps({"files": entries}, indent=1) + "\n")
        except OSError as exc:
            _discard(directory, entries)
            raise WriteFailed(
                f"{directory / JOURNAL}: cannot write the journal: {_reason(exc)}; nothing changed"
            ) from None
        try:
            _roll_forward(directory, entries, pause=SWITCHES.pause_between_renames_s)
        except OSError as exc:
            failed = getattr(exc, "filename", None) or directory
            try:
                _roll_back(directory, entries)
            except OSError:
                raise WriteFailed(
                    f"{failed}: cannot replace: {_reason(exc)}; and the old "
                    "files could not be put back (the journal stays: the next "
                    "start tries again)"
                ) from None
            _finish(directory, entries)
            raise WriteFailed(
                f"{failed}: cannot replace: {_reason(exc)}; nothing changed"
            ) from None
        _finish(directory, entries)


def recover(directory: Path) -> None:
    """Finish or undo a multi-file write that was interrupted (module docstring). Cheap
    when there is nothing to do: no lock is taken and nothing is created."""
    if not directory.is_dir() or not _leftovers(directory):
        return
    with _locked(directory):
        _recover_locked(directory)


def _is_name(name: str) -> bool:
    return bool(name) and "/" not in name and not name.startswith(".")


def _leftovers(directory: Path) -> bool:
    if (directory / JOURNAL).exists():
        return True
    return any(_is_staged(p.name) for p in directory.glob(".*"))


def _is_staged(name: str) -> bool:
    journal_temporary = name.startswith(_temporary_prefix(JOURNAL)) and name.endswith(TMP)
    return name.endswith((NEW, OLD)) or journal_temporary


def _recover_locked(directory: Path) -> None:
    journal = directory / JOURNAL
    entries: list[dict[str, object]] | None = None
    try:
        document = json.loads(journal.read_text(encoding="utf-8"))
        entries = [dict(e) for e in document["files"]]  # written whole (write_file) or not at all
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WriteFailed(
            f"{journal}: an interrupted config write left a journal that "
            f"cannot be read ({exc}): see docs/configuration.md"
        ) from None
    if entries is not None:
        if not all(_is_name(str(e.get("name", ""))) for e in entries):
            raise WriteFailed(f"{journal}: names a file outside {directory}: not followed")
        try:
            _roll_forward(directory, entries)
        except OSError:
            _roll_back(directory, entries)  # an OSError here leaves the journal for later
        _finish(directory, entries)
    for path in directory.glob(".*"):
        if _is_staged(path.name):  # a write killed before its commit point, or its tidying
            with contextlib.suppress(OSError):  # (one that cannot go is tried next time)
                path.unlink()
    fsync_directory(directory)


def _stage(directory: Path, texts: Mapping[str, str | None]) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    try:
        for name, text in texts.items():
            target = directory / name
            exists = os.path.lexists(target)
            entry: dict[str, object] = {"name": name, "write": text is not None, "old": exists}
            entries.append(entry)
            if exists:
                os.link(target, directory / f".{name}{OLD}", follow_symlinks=False)
            if text is not None:
                mode = target.stat().st_mode & 0o777 if exists else 0o644
                staged = directory / f".{name}{NEW}"
                with open(staged, "x", encoding="utf-8") as out:
                    out.write(text)
                    out.flush()
                    os.fsync(out.fileno())
                os.chmod(staged, mode)
        fsync_directory(directory)
    except OSError as exc:
        _discard(directory, entries)
        where = getattr(exc, "filename", None) or directory
        raise WriteFailed(
            f"{where}: cannot prepare the change: {_reason(exc)}; nothing changed"
        ) from None
    return entries


def _roll_forward(directory: Path, entries: list[dict[str, object]], pause: float = 0.0) -> None:
    for i, entry in enumerate(entries):
        if i and pause:
            time.sleep(pause)
        name = str(entry["name"])
        if entry["write"]:
            staged = directory / f".{name}{NEW}"
            if staged.exists():  # else: renamed already (recovery after a crash)
                os.replace(staged, directory / name)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)
    fsync_directory(directory)


def _roll_back(directory: Path, entries: list[dict[str, object]]) -> None:
    for entry in entries:
        name = str(entry["name"])
        target, old = directory / name, directory / f".{name}{OLD}"
        staged = directory / f".{name}{NEW}"
        if entry["write"] and staged.exists():
            staged.unlink()  # never renamed: the file is still the old one
            continue
        if entry["old"]:
            if os.path.lexists(old):
                os.replace(old, target)
        else:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
    fsync_directory(directory)


def _finish(directory: Path, entries: list[dict[str, object]]) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory / JOURNAL).unlink()
    fsync_directory(directory)  # from here on the write is over, whatever is left below
    _discard(directory, entries)


def _discard(directory: Path, entries: list[dict[str, object]]) -> None:
    for entry in entries:
        for suffix in (NEW, OLD):
            with contextlib.suppress(OSError):  # a leftover is removed at the next recovery
                (directory / f".{entry['name']}{suffix}").unlink()


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    try:
        fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise WriteFailed(
            f"{directory / LOCK}: cannot open the write lock: {_reason(exc)}; nothing changed"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
