"""Scoped admin tokens and the audit trail: tokens from the server file (only
their SHA-256 in it, or a secret file), DNSD_ADMIN_TOKEN as one more admin token; a read
token cannot write, an override token cannot reload; every write lands in
STATE_DIR/audit.jsonl with its token's name, and GET /api/v1/audit?since= returns it."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

from dnsd.admin import audit
from dnsd.admin.audit import AuditLog
from tests.admin_client import http
from tests.processes import DnsdProcess
from tests.waiting import until

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
            ("reader", "PUT", route, 403),  # refusals are audited too
            ("operator", "PUT", route, 200),
            ("operator", "POST", "/api/v1/reload", 403),
            ("DNSD_ADMIN_TOKEN", "POST", "/api/v1/reload", 200),
            ("operator", "DELETE", route, 200),
        ]
        entries = [e for e in entries if e["status"] == 200]
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
        "reader",
        "operator",
        "operator",
        "DNSD_ADMIN_TOKEN",
        "operator",
    ]
    assert oct((state / "audit.jsonl").stat().st_mode & 0o777) == "0o600"
    assert READER not in server_file.read_text() and OPERATOR not in server_file.read_text()


def test_the_audit_trail_cannot_be_flooded_away_and_records_refusals(
    config_copy: Path, tmp_path: Path
) -> None:
    """Against `dnsd serve`: an override token writing as fast as it can
    gets 429 past its budget (nothing changes, a counted `audit_suppressed` line says how
    many), the first entry stays in the trail, and refused writes (401, 403, 400, 413) are
    recorded too."""
    server_file = tmp_path / "dnsd.yaml"
    digest = hashlib.sha256(OPERATOR.encode()).hexdigest()
    server_file.write_text(f"tokens:\n  - {{name: operator, scope: override, sha256: {digest}}}\n")
    state = tmp_path / "state"
    args = ("--config", str(server_file), "--state-dir", str(state))
    route = "/api/v1/overrides/pools/us-east"
    with DnsdProcess(config_copy, *args, env={"DNSD_ADMIN_TOKEN": ADMIN}) as dnsd:
        port = dnsd.admin_port
        assert http(port, "PUT", route, {"state": "down"}, token=ADMIN)[0] == 200  # the marker

        def write(i: int) -> int:
            return http(port, "PUT", route, {"state": "up" if i % 2 else "down"}, token=OPERATOR)[0]

        # Eight writers at once: the budget (20 a second past a burst of 300) is outrun even
        # when a loaded machine makes one write take longer than 50 ms.
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(write, range(900)))
        limited = statuses.count(429)
        assert limited > 50 and set(statuses) == {200, 429}
        refused = [
            http(port, "PUT", route, {"state": "down"})[0],  # no token
            http(port, "PUT", route, {"state": "down"}, token="not-a-token")[0],
            http(port, "PUT", route, {"state": 7}, token=ADMIN)[0],  # bad body
            http(port, "PUT", route, raw=b"{" + b" " * 70_000 + b"}", token=ADMIN)[0],
        ]
        assert refused == [401, 403, 400, 413]

        def suppressed() -> bool:  # the suppressed count is written within a second or two
            status, body = http(port, "GET", "/api/v1/audit", token=ADMIN)
            assert status == 200
            return any(e.get("kind") == "audit_suppressed" for e in body["entries"])

        until(suppressed, 5.0, "the audit_suppressed entry")
    lines = [json.loads(line) for line in (state / "audit.jsonl").read_text().splitlines()]
    assert lines[0]["token"] == "DNSD_ADMIN_TOKEN" and lines[0]["after"]["pools"] == {
        "us-east": "down"
    }
    written = [e for e in lines if e.get("token") == "operator" and e.get("status") == 200]
    assert len(written) == statuses.count(200)  # every applied write has its line
    suppressed = [e for e in lines if e.get("kind") == "audit_suppressed"]
    assert sum(e["count"] for e in suppressed if e["token"] == "operator") == limited
    tail = [(e["status"], e["token"]) for e in lines if e.get("error") is not None]
    assert tail == [(401, None), (403, None), (400, "DNSD_ADMIN_TOKEN"), (413, "DNSD_ADMIN_TOKEN")]
    assert all(e["route"] == route for e in lines if "route" in e)


def test_rotated_audit_files_keep_the_history(tmp_path: Path) -> None:
    """Past MAX_BYTES audit.jsonl becomes audit.jsonl.1 … .KEEP (the oldest goes);
    /api/v1/audit reads across them."""
    log = AuditLog(tmp_path)
    line = {"time": "2026-12-01T10:00:00.000+00:00", "pad": "x" * 1000}
    for i in range(5):
        log.append({**line, "n": i})
    for n in range(1, audit.KEEP + 2):
        log.rotated(n).write_text("")  # as if full: rotation must shift, not lose, them
    assert log.path is not None
    with open(log.path, "a") as handle:
        handle.write(" " * audit.MAX_BYTES)  # the next entry does not fit
    log.append({**line, "n": 5})
    assert log.path.read_text().count("\n") == 1
    assert json.loads(log.rotated(1).read_text().splitlines()[0])["n"] == 0
    assert not log.rotated(audit.KEEP + 1).exists() or log.rotated(audit.KEEP + 1).read_text() == ""
    assert [e["n"] for e in log.since(None)] == [0, 1, 2, 3, 4, 5]  # across the files
