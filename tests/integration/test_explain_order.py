"""`dnsd explain` in text lists the pools in the order the decision used them (not the
config's order) and says why every other pool did not answer; the text and `--json` come
from the same decision."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tests.conftest import DATA

GOOD = str(DATA / "good")
US_EAST_DOWN = ("--down", "use1-b-1", "--down", "use1-c-1", "--down", "use1-d-1",
                "--down", "use1-b-v6")  # fmt: skip
POOL_LINE = re.compile(r"^  (\d+\.|- ) (\S+)\s+(.*)$")


def explain(*args: str) -> tuple[list[tuple[str, str, str]], dict]:  # type: ignore[type-arg]
    cmd = [sys.executable, "-m", "dnsd", "explain", *args, "--dir", GOOD]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=30).stdout
    info = json.loads(
        subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True).stdout
    )
    start = text.splitlines().index(
        "pools:    in the order used; why each other one did not answer"
    )
    rows = []
    for line in text.splitlines()[start + 1 :]:
        match = POOL_LINE.match(line)
        if not match:
            break
        rows.append((match.group(1).strip(), match.group(2), match.group(3)))
    return rows, info


def test_the_order_used_not_the_config_order() -> None:
    # Germany maps to eu-west (country_pools) although us-east is listed first.
    rows, info = explain("www.example.test", "--client", "85.214.1.1")
    assert [r[1] for r in rows] == ["eu-west", "us-east", "maintenance"]
    assert rows[0] == ("1.", "eu-west", "ANSWERS")
    assert rows[1] == ("2.", "us-east", "not used: standby: eu-west comes first")
    assert [p["pool"] for p in info["pools"]] == [r[1] for r in rows]


def test_every_skipped_pool_says_why() -> None:
    rows, info = explain("www.example.test", "--client", "85.214.1.1", *US_EAST_DOWN,
                         "--down", "eu-west")  # fmt: skip
    assert rows[0] == ("1.", "maintenance", "ANSWERS")
    reasons = {pool: why for _, pool, why in rows[1:]}
    assert reasons == {
        "us-east": "skipped: unhealthy: 0 of 4 backends healthy, minimum_origins 1",
        "eu-west": "skipped: overridden down",
    }
    assert info["pool"] == "maintenance"


def test_trickle_and_fallback_reasons() -> None:
    rows, _ = explain("api.example.test", "--seed", "31")  # this seed draws under 0.1
    assert rows[0] == ("1.", "eu-west", "ANSWERS")
    assert rows[1][1] == "us-east"
    assert re.fullmatch(r"not used: trickle: draw 0\.\d+ < ratio 0\.1 sent this answer to the "
                        r"backup", rows[1][2])  # fmt: skip
    assert rows[2] == ("-", "maintenance", "skipped: the fallback: it answers only when no "
                       "default pool is healthy")  # fmt: skip
    rows, _ = explain("api.example.test", "--seed", "1")
    assert rows[0] == ("1.", "us-east", "ANSWERS")
    assert re.fullmatch(r"not used: trickle backup: draw 0\.\d+ >= ratio 0\.1, the primary "
                        r"answers", rows[1][2])  # fmt: skip
