"""`dnsd check --config FILE` judges the serve settings with `dnsd serve`'s own judge
(dnsd.cli.settings): whatever `dnsd serve --config FILE` refuses to start with, the check
refuses too, with the same message — one case per setting family, real processes."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import DATA

SAFE = 'listen: ["127.0.0.1:0"]\nadmin: "off"\n'  # should serve start anyway: no fixed port


def dnsd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dnsd", *args], capture_output=True, text=True, timeout=30
    )


def check_and_serve(tmp_path: Path, text: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    server_file = tmp_path / "dnsd.yaml"
    server_file.write_text(text)
    zones = str(DATA / "good")
    with ThreadPoolExecutor(2) as pool:
        check = pool.submit(dnsd, "check", zones, "--config", str(server_file))
        serve = pool.submit(dnsd, "serve", zones, "--config", str(server_file))
        return check.result(), serve.result()


def cases(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """family: (the server file, the message both print)."""
    return {
        "listen": (
            'listen: ["nowhere"]\nadmin: "off"\n',
            "dnsd.yaml:1: listen: expected ADDR:PORT, got 'nowhere'",
        ),
        "admin": (
            'listen: ["127.0.0.1:0"]\nadmin: "nowhere"\n',
            "--admin: expected ADDR:PORT, got 'nowhere' (or off)",
        ),
        "workers": (SAFE + "workers: 100\n", "--workers: from 1 to 64"),
        "rrl": (SAFE + "rrl_rate: inf\n", "--rrl-rate: a finite number of replies per second"),
        "query log": (SAFE + "query_log_sample: 2\n", "--query-log-sample: a share from 0 to 1"),
        "region": (SAFE + "pop_region: xx-nowhere\n", "--pop-region: unknown region 'xx-nowhere'"),
        "redis needs a node": (
            SAFE + "redis: redis://127.0.0.1:1/0\nredis_insecure: true\n",
            "--redis needs --node NAME and --pop-region CODE",
        ),
        "redis needs a key": (
            SAFE + "redis: redis://127.0.0.1:1/0\nnode: a\npop_region: WEU\n",
            "--redis needs --redis-key-file FILE",
        ),
        "redis key": (
            SAFE + f"redis: redis://127.0.0.1:1/0\nnode: a\npop_region: WEU\n"
            f"redis_key_file: {tmp_path / 'short.key'}\n",
            "--redis-key-file: ",
        ),
        "redis url": (
            SAFE + "redis: http://127.0.0.1:1/0\nnode: a\npop_region: WEU\nredis_insecure: true\n",
            "the scheme is one of redis, rediss",
        ),
        "redis ca": (
            SAFE + "redis: rediss://127.0.0.1:1/0\nnode: a\npop_region: WEU\n"
            f"redis_insecure: true\nredis_ca_file: {tmp_path / 'absent.pem'}\n",
            "--redis-ca-file: ",
        ),
        "state dir": (
            SAFE + f"state_dir: {tmp_path / 'plain' / 'state'}\n",
            f"--state-dir: cannot read or create the cookie key: {tmp_path / 'plain'}:"
            " not a directory",
        ),
        "tokens": (
            SAFE + "tokens:\n  - {name: ops, scope: admin, sha256: abc}\n",
            "dnsd.yaml:4: tokens[0].sha256: expected 64 hex digits",
        ),
        "webhooks": (
            SAFE + "webhooks:\n  - {url: ftp://x, events: [failover], secret: s}\n",
            "dnsd.yaml:4: webhooks[0].url: an http:// or https:// URL",
        ),
        "log": (SAFE + "log_format: xml\n", "dnsd.yaml:3: log_format: 'xml' is not one of"),
    }


FAMILIES = list(cases(Path("/nonexistent")))


@pytest.mark.parametrize("family", FAMILIES)
def test_check_refuses_what_serve_refuses_with_the_same_message(
    tmp_path: Path, family: str
) -> None:
    (tmp_path / "plain").write_text("a file, not a directory\n")
    (tmp_path / "short.key").write_text("too short\n")
    text, message = cases(tmp_path)[family]
    check, serve = check_and_serve(tmp_path, text)
    assert check.returncode != 0 and serve.returncode != 0, (check.stderr, serve.stderr)
    assert message in check.stderr, check.stderr
    assert check.stderr.strip() == serve.stderr.strip()  # the same judge, the same words


def test_a_good_file_passes_and_the_check_makes_no_cookie_key(tmp_path: Path) -> None:
    state = tmp_path / "new" / "state"
    (tmp_path / "dnsd.yaml").write_text(SAFE + f"state_dir: {state}\nworkers: 4\n")
    check = dnsd("check", str(DATA / "good"), "--config", str(tmp_path / "dnsd.yaml"))
    assert check.returncode == 0, check.stderr
    assert not (tmp_path / "new").exists()  # judged, not made: serve makes it at its start
