"""`pip install .` without a C compiler still gives a working dnsd: the compiled
serving loop is optional, the pure loop serves, and the log says which."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from dnslib import DNSRecord

from dnsd.drill.process import DnsdProcess
from tests.dnsclient import udp_raw

ROOT = Path(__file__).parent.parent.parent


def test_pip_install_without_a_compiler_serves_with_the_pure_loop(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # A copy of the sources only: a build/ or an in-place .so another test (or a developer)
    # left in the checkout would be installed as it is, compiler or not.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "*.so", "*.egg-info", "__pycache__", ".pytest_cache"
        ),
    )
    no_compiler = {**os.environ, "CC": "/bin/false", "LDSHARED": "/bin/false"}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q",
         "--disable-pip-version-check", "--root-user-action=ignore", "--target", str(site),
         str(source)],
        env=no_compiler, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    assert (site / "dnsd" / "fastpath" / "cache.py").exists()  # subpackages installed too
    assert not list((site / "dnsd").glob("_fastloop*.so")), "the extension was built anyway"
    # As on a machine that never installed this checkout: the editable install's import
    # hook (which would find the checkout's own build) is taken out at start-up.
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import sys\nsys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]\n"
    )
    env = {"PYTHONPATH": f"{site}:{hooks}"}  # run from tmp_path: not the checkout's dnsd
    with DnsdProcess(ROOT / "zones", "--admin", "off", env=env, cwd=tmp_path) as proc:
        proc.wait_for_log("serving loop answers")
        assert "the pure serving loop answers (dnsd._fastloop was not built" in proc.output
        for _ in range(3):  # the second and third are cache hits: the pure loop answers them
            raw = udp_raw(proc.port, DNSRecord.question("www.example.test").pack())
            assert raw is not None and DNSRecord.parse(raw).header.rcode == 0
