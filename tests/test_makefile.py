"""`make run` (the README's first command) installs into its venv only when the checkout
changed since the last install, and keeps its state outside the checkout. Real make, asked
what it would run (`make -n`): the venv itself is tested in tests/e2e/test_install_venv.py."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parent.parent


def make_n(venv: Path, env: dict[str, str], *args: str) -> list[str]:
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "run", f"VENV={venv}", *args],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if not line.startswith("make")]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_STATE_HOME", "STATE_DIR")}
    return env | extra


def test_run_installs_once_then_only_when_the_checkout_changed(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = clean_env()
    # a fresh machine: no venv, so it installs, then serves
    first = make_n(venv, env)
    assert any("scripts/install-venv.sh" in line for line in first), first
    assert first[-1].startswith(f"{venv}/bin/dnsd serve zones/")
    # installed (the stamp the install leaves, newer than every file): it only serves
    venv.mkdir()
    stamp = venv / ".dnsd-installed"
    stamp.touch()
    again = make_n(venv, env)
    assert len(again) == 1 and again[0].startswith(f"{venv}/bin/dnsd serve zones/"), again
    # a file dnsd is built from changed after the install: installed again
    older = (ROOT / "pyproject.toml").stat().st_mtime - 60
    os.utime(stamp, (older, older))
    assert any("scripts/install-venv.sh" in line for line in make_n(venv, env))
    # another EXTRAS has its own stamp: `EXTRAS=plots` installs matplotlib once
    stamp.touch()
    assert any("install-venv.sh" in line for line in make_n(venv, env, "EXTRAS=plots"))
    (venv / ".dnsd-installed-plots").touch()
    assert len(make_n(venv, env, "EXTRAS=plots")) == 1


def test_run_keeps_its_state_outside_the_checkout(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".dnsd-installed").touch()

    def state_dir(env: dict[str, str]) -> Path:
        [serve] = make_n(venv, env)
        found = re.search(r'--state-dir "([^"]+)"', serve)
        assert found, serve
        return Path(found.group(1))

    home = tmp_path / "home"
    default = state_dir(clean_env(HOME=str(home)))
    assert default == home / ".local" / "state" / "dnsd"
    assert state_dir(clean_env(XDG_STATE_HOME=str(tmp_path / "xdg"))) == tmp_path / "xdg" / "dnsd"
    for where in (default, state_dir(clean_env())):
        assert where.is_absolute() and ROOT.resolve() not in where.resolve().parents


def test_make_test_starts_the_longest_files_first() -> None:
    """tests/longest_first.py names files that exist, and `make test` keeps its order."""
    from tests.longest_first import LONGEST_FIRST

    missing = [path for path in LONGEST_FIRST if not (ROOT / path).is_file()]
    assert not missing, f"tests/longest_first.py names files that are gone: {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    recipe = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(ROOT), "test"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.splitlines()[-1]  # the suite's command, as make would run it
    assert "pytest" in recipe and "--dist loadfile --no-loadscope-reorder" in recipe, recipe
