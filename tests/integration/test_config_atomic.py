"""Config writes that touch two files are all or nothing: a real
`dnsd serve` is killed with SIGKILL at random points of config API change sets that
rewrite two YAML files; every time, the directory then holds one whole generation (both
files old or both new) and `dnsd serve` starts again on it and serves that generation.
Part of the runs widen the window between the two renames (a test-only pause) and kill
inside it; the others kill at a random instant of the whole request."""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from dnsd.atomic_files import JOURNAL, LOCK
from tests.admin_client import http
from tests.processes import DnsdProcess

TOKEN = "config-atomic-test-token"
FILES = ("example.test.yaml", "child.example.test.yaml")
RUNS = 20


def change_set(generation: int) -> dict[str, object]:
    """One record in each zone: each zone is its own file."""
    address = f"203.0.113.{generation}"
    return {"changes": [
        {"method": "PUT", "route": "zones/example.test/records/gen",
         "body": {"A": [address]}},
        {"method": "PUT", "route": "zones/child.example.test/records/gen",
         "body": {"A": [address]}},
    ]}  # fmt: skip


def texts(directory: Path) -> tuple[str, ...]:
    return tuple((directory / name).read_text() for name in FILES)


def dig(port: int, name: str) -> list[str]:
    out = subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), name, "A", "+short", "+tries=1", "+time=2"],
        capture_output=True, text=True, timeout=10, check=True,
    )  # fmt: skip
    return out.stdout.split()


def post_quietly(port: int, body: dict[str, object]) -> None:
    """The request whose server is killed under it: its outcome is not looked at."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/config/changes", data=json.dumps(body).encode(),
        method="POST", headers={"Authorization": f"Bearer {TOKEN}",
                                "Content-Type": "application/json"},
    )  # fmt: skip
    with contextlib.suppress(OSError):
        urllib.request.urlopen(request, timeout=30).read()


def test_sigkill_during_two_file_writes_leaves_one_whole_generation(
    config_copy: Path, tmp_path: Path
) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    # The generations: the texts a change set makes, from a run nobody interrupts.
    original = tmp_path / "original"
    shutil.copytree(config_copy, original)
    generations = [texts(config_copy)]
    with DnsdProcess(config_copy, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
        for generation in (1,):
            started = time.monotonic()
            status, body = http(dnsd.admin_port, "POST", "/api/v1/config/changes",
                                change_set(generation), token=TOKEN)  # fmt: skip
            request_s = time.monotonic() - started
            assert status == 200, body
            generations.append(texts(config_copy))
            assert dig(dnsd.port, "gen.example.test") == [f"203.0.113.{generation}"]
    assert generations[1] != generations[0] and "gen: " not in "".join(generations[0])
    outcomes = []
    for run in range(RUNS):
        directory = tmp_path / f"run{run}"
        shutil.copytree(original, directory)
        pause = run % 2 == 0  # half the runs: killed between the two renames
        env = {"DNSD_ADMIN_TOKEN": TOKEN}
        hook = ("--test-pause-between-renames", "1.0") if pause else ()
        old = generations[0]
        assert texts(directory) == old
        generation = 3 + run
        with DnsdProcess(directory, *hook, env=env) as dnsd:
            assert dnsd.proc is not None
            writer = threading.Thread(target=post_quietly,
                                      args=(dnsd.admin_port, change_set(generation)))  # fmt: skip
            writer.start()
            if pause:
                deadline = time.monotonic() + 20
                while not (directory / JOURNAL).exists():  # committed, renaming, paused
                    assert time.monotonic() < deadline, dnsd.output
                    time.sleep(0.005)
                time.sleep(rng.uniform(0.0, 0.5))
            else:
                time.sleep(rng.uniform(0.0, 1.5 * request_s))
            dnsd.proc.send_signal(signal.SIGKILL)
            dnsd.proc.wait()
            writer.join()
        with DnsdProcess(directory, env={"DNSD_ADMIN_TOKEN": TOKEN}) as again:
            now = texts(directory)
            address = dig(again.port, "gen.example.test")
            assert address == dig(again.port, "gen.child.example.test"), (seed, run)
        new = tuple(t.replace("[203.0.113.1]", f"[203.0.113.{generation}]") for t in generations[1])
        assert now in (old, new), f"seed {seed}, run {run}: a mix of generations"
        assert address == ([] if now == old else [f"203.0.113.{generation}"]), (seed, run)
        assert not (directory / JOURNAL).exists()
        leftovers = [p.name for p in directory.glob(".*") if p.name != LOCK]
        assert not leftovers, (seed, run, leftovers)
        outcomes.append("new" if now == new else "old")
    print(f"seed {seed}: {outcomes}")
    # the paused runs were killed after the commit point: rolled forward at the start
    assert all(outcomes[run] == "new" for run in range(0, RUNS, 2)), (seed, outcomes)


def test_a_file_that_cannot_be_replaced_leaves_every_file_as_it_was(config_copy: Path) -> None:
    """The second file is immutable (chattr +i, as root): the API answers with an error
    naming it, both files keep their old text, and `dnsd check` accepts the directory."""
    second = config_copy / FILES[1]
    before = texts(config_copy)
    subprocess.run(["chattr", "+i", str(second)], check=True)
    try:
        with DnsdProcess(config_copy, env={"DNSD_ADMIN_TOKEN": TOKEN}) as dnsd:
            status, body = http(dnsd.admin_port, "POST", "/api/v1/config/changes",
                                change_set(1), token=TOKEN)  # fmt: skip
            assert status == 500, body
            assert str(second) in body["error"] and "nothing changed" in body["error"], body
            assert texts(config_copy) == before
            assert dig(dnsd.port, "gen.example.test") == []
    finally:
        subprocess.run(["chattr", "-i", str(second)], check=True)
    done = subprocess.run([sys.executable, "-m", "dnsd", "check", str(config_copy)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert texts(config_copy) == before
