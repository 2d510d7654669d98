"""Reading files named by the configuration: only regular files inside the config
directory, of bounded size."""

from __future__ import annotations

from pathlib import Path

MAX_FILE_BYTES = 64 << 20  # one config file (the 100,000-record benchmark zone is ~6 MiB)


class UnsafeFile(Exception):
    """A name in the config directory that is not a config file dnsd may read."""


def read_config_file(directory: Path, path: Path) -> str:
    """The text of one config file: a regular file inside the directory (a symlink may
    point elsewhere only inside it), of bounded size. A FIFO or a device would block or
    never end a reload; a symlink out of the directory could make errors quote any file."""
    real = path.resolve()
    if not real.is_relative_to(directory.resolve()):
        raise UnsafeFile("outside the config directory (or a symlink out of it): not read")
    if not real.is_file():
        raise UnsafeFile("not a regular file: not read")
    if real.stat().st_size > MAX_FILE_BYTES:
        raise UnsafeFile(f"larger than {MAX_FILE_BYTES >> 20} MiB: not read")
    return real.read_text(encoding="utf-8")
