"""The README's first command on a Python that refuses `pip install` (PEP 668, as Debian 12
ships it): `make run` installs into a virtual environment instead, so it works there; and
that install (no `plots` extra) runs drills without matplotlib, printing the tables and how
to get pictures."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
MARKER = "[externally-managed]\nError=managed by the system (a PEP 668 test, as on Debian 12)\n"


def managed_python(root: Path) -> Path:
    """A Python of its own prefix (the interpreter copied, the standard library linked)
    whose stdlib holds an EXTERNALLY-MANAGED file: pip refuses to install into it, as
    Debian's does. Its site-packages holds only pip, like a stock python3-pip."""
    stdlib = Path(sysconfig.get_path("stdlib"))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    lib = root / "lib" / version
    (lib / "site-packages").mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            (lib / entry.name).symlink_to(entry)
    import pip

    (lib / "site-packages" / "pip").symlink_to(Path(pip.__file__).parent)
    (lib / "EXTERNALLY-MANAGED").write_text(MARKER)
    (root / "bin").mkdir()
    python = root / "bin" / "python3"
    python.write_bytes(Path(os.path.realpath(sys.executable)).read_bytes())
    python.chmod(0o755)
    return python


def clean_env() -> dict[str, str]:
    """No PYTHONPATH: the venv must run its own installed dnsd, not this checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("managed")
    python = managed_python(root / "python")
    refused = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--dry-run", str(ROOT)],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )  # fmt: skip
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr
    venv = root / "venv"
    done = subprocess.run(
        ["make", "-C", str(ROOT), "install", f"PYTHON={python}", f"VENV={venv}"],
        capture_output=True, text=True, timeout=600, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv


def test_make_installs_into_a_venv_where_pip_is_refused(installed: Path) -> None:
    version = subprocess.run([str(installed / "bin" / "dnsd"), "--version"], capture_output=True,
                             text=True, timeout=60, env=clean_env())  # fmt: skip
    assert version.returncode == 0 and version.stdout.startswith("dnsd ")
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import dnsd; print(dnsd.__file__)"],
        capture_output=True, text=True, timeout=60, cwd=installed, env=clean_env(),
    )  # fmt: skip
    assert where.stdout.startswith(str(installed)), where.stdout + where.stderr


def test_drills_without_the_plots_extra_print_tables_and_say_how(
    installed: Path, tmp_path: Path
) -> None:
    python = str(installed / "bin" / "python")
    no_mpl = subprocess.run([python, "-c", "import matplotlib"], capture_output=True,
                            env=clean_env(), cwd=tmp_path)  # fmt: skip
    assert no_mpl.returncode != 0, "the plain install brought matplotlib"
    picture = tmp_path / "drill.png"
    drill = subprocess.run(
        [python, "-m", "dnsd", "drill", "primary-down", "--plot", str(picture), "--quiet"],
        capture_output=True, text=True, timeout=300, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert drill.returncode == 0, drill.stdout[-3000:] + drill.stderr[-3000:]
    assert "primary-down" in drill.stdout and "PASS" in drill.stdout
    assert "pip install 'dnsd[plots]'" in drill.stderr
    assert not picture.exists()
