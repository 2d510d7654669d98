"""The server file: `dnsd serve --config FILE` takes every serve setting from
YAML, flags win over it, `dnsd config show` says where each setting came from, and `dnsd
check --config` reports the file's problems as file:line like the zones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import DATA
from tests.processes import DnsdProcess


def dnsd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dnsd", *args], capture_output=True, text=True)


def test_serve_takes_the_file_and_flags_win(tmp_path: Path) -> None:
    server_file = tmp_path / "dnsd.yaml"
    server_file.write_text(f"dir: {DATA / 'good'}\nlog_format: json\nrrl_rate: 0\n")
    with DnsdProcess(DATA / "good", "--config", str(server_file)) as server:
        messages = [json.loads(line) for line in server.lines if line.startswith("{")]
        assert any("listening on" in str(message) for message in messages)  # JSON, as filed
    with DnsdProcess(DATA / "good", "--config", str(server_file), "--log-format", "text") as server:
        assert any(" INFO dnsd.server: listening on" in line for line in server.lines)


def test_config_show_names_where_each_setting_came_from(tmp_path: Path) -> None:
    server_file = tmp_path / "dnsd.yaml"
    server_file.write_text('listen: ["127.0.0.1:5399"]\nrrl_rate: 50\nworkers: 2\n')
    done = dnsd("config", "show", "--config", str(server_file), "--rrl-rate", "7")
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" = ", 1) for line in done.stdout.splitlines() if " = " in line)
    assert lines["rrl_rate"] == "7.0  (flag)"
    assert lines["workers"] == "2  (file)"
    assert lines["listen"] == "['127.0.0.1:5399']  (file)"
    assert lines["rrl_slip"] == "2  (default)"
    assert lines["admin_token"].endswith("(environment DNSD_ADMIN_TOKEN or DNSD_ADMIN_TOKEN_FILE)")


def test_check_reports_the_server_files_problems_by_line(tmp_path: Path) -> None:
    server_file = tmp_path / "dnsd.yaml"
    server_file.write_text(
        "rrl_rat: 5\nworkers: many\nlisten: nope\nlog_format: xml\nreuse_port: 1\n"
    )
    done = dnsd("check", str(DATA / "good"), "--config", str(server_file))
    assert done.returncode == 1
    expected = [
        f'{server_file}:1: rrl_rat: unknown key (did you mean "rrl_rate"?)',
        f"{server_file}:2: workers: expected a whole number, got 'many'",
        f"{server_file}:3: listen: expected ADDR:PORT, got 'nope'",
        f"{server_file}:4: log_format: 'xml' is not one of text, json",
        f"{server_file}:5: reuse_port: expected true or false",
    ]
    assert done.stderr.splitlines() == expected
    refused = dnsd("serve", str(DATA / "good"), "--config", str(server_file))
    assert refused.returncode == 2 and "rrl_rat: unknown key" in refused.stderr
