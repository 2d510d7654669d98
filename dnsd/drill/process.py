"""Run `dnsd serve` as a child process on loopback and read its ports from its log.

Used by drills (which restart dnsd) and by the end-to-end tests."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

LISTENING = re.compile(r"listening on (\S+) port (\d+)")
ADMIN = re.compile(r"admin API on http://(\S+):(\d+)/")


class DnsdProcess:
    def __init__(
        self,
        config_dir: Path | str,
        *extra: str,
        env: dict[str, str] | None = None,
        listen: str = "127.0.0.1:0",
        nofile: int | None = None,
        cwd: Path | None = None,
        start_timeout_s: float = 15.0,
    ) -> None:
        """`nofile`: run with this descriptor limit (soft and hard), as a small host would.
        `cwd`: the directory it runs in (`python -m` imports from there first)."""
        defaults = []
        if "--state-dir" not in extra:
            defaults += ["--state-dir", tempfile.mkdtemp(prefix="dnsd-state-")]
        if "--admin" not in extra:
            defaults += ["--admin", "127.0.0.1:0"]
        serve = ["-m", "dnsd", "serve", str(config_dir), "--listen", listen]
        self.args = [sys.executable, *serve, *defaults, *extra]
        self.extra_env = env or {}
        self.nofile = nofile
        self.cwd = cwd
        self.start_timeout_s = start_timeout_s  # a big config takes longer to load
        self.admin_port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.lines: list[str] = []
        self._reader: threading.Thread | None = None

    def __enter__(self) -> DnsdProcess:
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.extra_env)
        limit = self.nofile
        self.proc = subprocess.Popen(
            self.args,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=self.cwd,
            preexec_fn=None
            if limit is None
            else lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.start_timeout_s
        wants_admin = "off" not in self.args[self.args.index("--admin") + 1 :][:1]
        while not self.port or (wants_admin and not self.admin_port):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("dnsd did not start:\n" + self.output)
            for line in list(self.lines):
                match = LISTENING.search(line)
                if match:
                    self.port = int(match.group(2))
                admin = ADMIN.search(line)
                if admin:
                    self.admin_port = int(admin.group(2))
            time.sleep(0.02)
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def signal(self, sig: int) -> None:
        """Send `sig`; SIGSTOP returns only once every thread has stopped. The kernel wakes
        one thread, which stops the others when it next runs: until then (milliseconds on a
        loaded machine) the UDP loop's thread keeps answering."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        if sig == signal.SIGSTOP:
            deadline = time.monotonic() + 10
            while not _all_threads_stopped(self.proc.pid):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"dnsd (pid {self.proc.pid}) did not stop in 10 s")
                time.sleep(0.001)

    def wait_for_log(self, text: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line with {text!r}:\n{self.output}")
            time.sleep(0.02)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _all_threads_stopped(pid: int) -> bool:
    """Every thread of `pid` is in state T (stopped), by /proc/PID/task/*/stat."""
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # a thread that has just gone
        if state != "T":
            return False
    return True
