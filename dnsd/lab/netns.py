"""Linux network namespaces for the lab: create, join, run in, remove (root only).

Everything the lab makes is named with PREFIX, so `remove_all()` finds what a crashed run
left behind. Sockets (DNS queries, admin API calls) are opened from this process inside a
namespace by switching the calling thread into it for the moment the socket is made
(`entered`); a socket stays in the namespace it was made in.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

PREFIX = "dnsdlab-"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class LabError(RuntimeError):
    """The lab cannot be built here (not root, no namespaces, a command failed)."""


def ip(*args: str, ns: str | None = None, check: bool = True) -> str:
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if check and done.returncode != 0:
        raise LabError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def available() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces)"
    probe = f"{PREFIX}probe"
    try:
        ip("netns", "add", probe)
    except (LabError, FileNotFoundError) as exc:
        return f"cannot create a network namespace: {exc}"
    ip("netns", "del", probe, check=False)
    return None


def netem_supported() -> bool:
    """Whether this kernel has the netem queueing discipline (sch_netem), tried on a
    dummy device in a throwaway namespace."""
    probe = f"{PREFIX}netem"
    ip("netns", "add", probe, check=False)
    try:
        ip("link", "add", "d0", "type", "dummy", ns=probe, check=False)
        done = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                probe,
                "tc",
                "qdisc",
                "add",
                "dev",
                "d0",
                "root",
                "netem",
                "delay",
                "1ms",
            ],
            capture_output=True,
        )
        return done.returncode == 0
    finally:
        ip("netns", "del", probe, check=False)


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX)]


def pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def remove_all() -> None:
    """Stop every process in a lab namespace, then remove the namespaces (their veths and
    the bridge go with them)."""
    for ns in namespaces():
        for pid in pids(ns):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while any(pids(ns) for ns in namespaces()) and time.monotonic() < deadline:
        time.sleep(0.1)
    for ns in namespaces():
        for pid in pids(ns):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        ip("netns", "del", ns, check=False)


def spawn(
    ns: str, argv: list[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, *argv],
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )


@contextlib.contextmanager
def entered(ns: str) -> Iterator[None]:
    """The calling thread in namespace `ns` for the block (sockets made here stay in it)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise LabError(f"setns {ns}: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            _libc.setns(own, CLONE_NEWNET)
    finally:
        os.close(own)
        os.close(target)
