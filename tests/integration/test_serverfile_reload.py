"""The server file is reloaded with the zones: SIGHUP and the reload API change tokens and
webhooks live, name the settings that need a restart (and keep their old value), and a bad
server file changes nothing and says which file and line."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

from tests.admin_client import http
from tests.integration.test_webhooks import Receiver
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess
from tests.waiting import until

OLD = "old-token-0123456789abcdef"
NEW = "new-token-0123456789abcdef"
HOOK_SECRET = "webhook-secret-0123456789"


def token_entry(name: str, secret: str) -> str:
    digest = hashlib.sha256(secret.encode()).hexdigest()
    return f"  - {{name: {name}, scope: admin, sha256: {digest}}}\n"


def wait_until(check, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    until(check, timeout)


def test_tokens_and_webhooks_change_live_and_the_rest_waits_for_a_restart(
    config_copy: Path, tmp_path: Path
) -> None:
    loop = LoopThread()
    try:
        receiver = Receiver(loop)
        hook_port = loop.call(receiver.start())
        path = tmp_path / "dnsd.yaml"
        path.write_text("rrl_rate: 50\ntokens:\n" + token_entry("old", OLD))
        with DnsdProcess(config_copy, "--config", str(path)) as dnsd:
            port = dnsd.admin_port
            assert http(port, "GET", "/api/v1/overrides", token=OLD)[0] == 200
            assert http(port, "GET", "/api/v1/overrides", token=NEW)[0] == 403

            # A new token instead of the old, a webhook, two settings bound at start (listen is
            # given as a flag: the flag wins, so its change in the file is no change).
            path.write_text(
                "rrl_rate: 7\nquery_log_sample: 0.5\nlisten: ['127.0.0.1:0']\ntokens:\n"
                + token_entry("new", NEW)
                + f"webhooks:\n  - {{url: 'http://127.0.0.1:{hook_port}/hook', "
                f"events: [override], secret: {HOOK_SECRET}}}\n"
            )
            status, body = http(port, "POST", "/api/v1/reload", token=OLD)
            assert status == 200, body
            assert body["restart_needed"] == ["query_log_sample", "rrl_rate"]
            dnsd.wait_for_log("query_log_sample, rrl_rate changed and need a restart")
            assert str(path) in next(line for line in dnsd.lines if "need a restart" in line)
            assert http(port, "GET", "/api/v1/overrides", token=OLD)[0] == 403
            assert http(port, "GET", "/api/v1/overrides", token=NEW)[0] == 200

            # The webhook added by the reload gets the next event.
            body = {"state": "down", "reason": "reload test", "for": "5m"}
            put = http(port, "PUT", "/api/v1/overrides/pools/us-east", body, token=NEW)
            assert put[0] == 200, put
            wait_until(lambda: receiver.received)
            assert json.loads(receiver.received[0][1])["event"] == "override"

            # A bad server file changes nothing, and names the file and line (SIGHUP).
            path.write_text("tokens:\n  - {name: broken, scope: admin, sha256: nothex}\n")
            dnsd.signal(signal.SIGHUP)
            dnsd.wait_for_log("reload failed")
            dnsd.wait_for_log(f"{path}:2: tokens[0].sha256: expected 64 hex digits")
            assert http(port, "GET", "/api/v1/overrides", token=NEW)[0] == 200
            status, body = http(port, "POST", "/api/v1/reload", token=NEW)
            assert status == 400 and any(str(path) in e for e in body["errors"]), body

            # SIGHUP reads a good file again: the old token is back, the webhook gone.
            path.write_text("rrl_rate: 50\ntokens:\n" + token_entry("old", OLD))
            dnsd.signal(signal.SIGHUP)
            wait_until(lambda: http(port, "GET", "/api/v1/overrides", token=OLD)[0] == 200)
            assert http(port, "GET", "/api/v1/overrides", token=NEW)[0] == 403
            status, body = http(port, "POST", "/api/v1/reload", token=OLD)
            assert status == 200 and body["restart_needed"] == [], body
    finally:
        loop.close()
