"""Scoped admin tokens and the audit trail (issue 19): tokens from the server file (only
their SHA-256 in it, or a secret file), DNSD_ADMIN_TOKEN as one more admin token; a read
token cannot write, an override token cannot reload; every write lands in
STATE_DIR/audit.jsonl with its token's name, and GET /api/v1/audit?since= returns it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import quote

from tests.admin_client import http
from tests.processes import DnsdProcess

READER, OPERATOR, ADMIN = (
    "reader-secret-0123456789",
    "operator-secret-0123456789",
    "admin-env-token",
)


def test_scopes_are_enforced_and_every_write_is_audited(config_copy: Path, tmp_path: Path) -> None:
    (tmp_path / "reader.secret").write_text(READER + "\n")
    server_file = tmp_path / "dnsd.yaml"
    server_file.write_text(
        "tokens:\n"
        "  - {name: reader, scope: read, secret_file: reader.secret}\n"
        f"  - {{name: operator, scope: override, sha256: {hashlib.sha256(OPERATOR.encode()).hexdigest()}}}\n"
    )
    state = tmp_path / "state"
    args = ("--config", str(server_file), "--state-dir", str(state))
    with DnsdProcess(config_copy, *args, env={"DNSD_ADMIN_TOKEN": ADMIN}) as dnsd:
        port = dnsd.admin_port
        route = "/api/v1/overrides/pools/us-east"
        status, body = http(port, "PUT", route, {"state": "down"}, token=READER)
        assert status == 403 and "scope read" in body["error"]
        assert http(port, "PUT", route, {"state": "down"}, token=OPERATOR)[0] == 200
        status, body = http(port, "POST", "/api/v1/reload", token=OPERATOR)
        assert status == 403 and "needs admin" in body["error"]
        assert http(port, "POST", "/api/v1/reload", token=ADMIN)[0] == 200
        assert http(port, "DELETE", route, token=OPERATOR)[0] == 200
        assert http(port, "GET", "/api/v1/audit")[0] == 401  # it names tokens: a token needed
        status, body = http(port, "GET", "/api/v1/audit", token=READER)
        assert status == 200
        entries = body["entries"]
        assert [(e["token"], e["method"], e["route"], e["status"]) for e in entries] == [
            ("operator", "PUT", route, 200),
            ("DNSD_ADMIN_TOKEN", "POST", "/api/v1/reload", 200),
            ("operator", "DELETE", route, 200),
        ]
        assert entries[0]["before"]["pools"] == {} and entries[0]["after"]["pools"] == {
            "us-east": "down"
        }
        assert entries[1]["before"] == {"generation": 1} and entries[1]["after"] == {
            "generation": 2
        }
        assert all(e["source"] == "127.0.0.1" for e in entries)
        later = http(port, "GET", f"/api/v1/audit?since={quote(entries[2]['time'])}", token=READER)[
            1
        ]
        assert [e["method"] for e in later["entries"]] == ["DELETE"]
        assert http(port, "GET", "/api/v1/audit?since=yesterday", token=READER)[0] == 400
    lines = (state / "audit.jsonl").read_text().splitlines()
    assert [json.loads(line)["token"] for line in lines] == [
        "operator",
        "DNSD_ADMIN_TOKEN",
        "operator",
    ]
    assert oct((state / "audit.jsonl").stat().st_mode & 0o777) == "0o600"
    assert READER not in server_file.read_text() and OPERATOR not in server_file.read_text()
