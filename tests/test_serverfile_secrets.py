"""A server file's `secret_file` is read bounded: a FIFO or a device is refused at once with a
clear error (it used to block the reader, or grow memory without end)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dnsd import serverfile
from dnsd.cli import build_parser


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_non_regular_secret_file_is_refused_quickly(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(tmp_path / "secret")
    else:
        (tmp_path / "secret").symlink_to("/dev/zero")
    path = tmp_path / "server.yaml"
    path.write_text("tokens:\n  - {name: ops, scope: admin, secret_file: secret}\n")
    out: list[object] = []
    reader = threading.Thread(
        target=lambda: out.append(serverfile.read(path, build_parser())), daemon=True
    )
    reader.start()
    reader.join(5.0)
    assert not reader.is_alive(), "reading the server file blocked"
    _, reasons = out[0]  # type: ignore[misc]
    assert any("not a regular file" in str(r) for r in reasons), reasons
