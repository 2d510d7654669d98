#!/usr/bin/env python3
"""Regenerate the status page screenshots of docs/api.md (docs/images/status-*.png).

Starts a real `dnsd serve` with three local HTTP backends (tests/status_scene.py), then
captures the page with headless Chromium (`chromium --screenshot`) in three states:
healthy, failed over by a trickle of 1.0, and pool `eu` down by an override. Each PNG is
reduced to a 256-colour palette (Pillow, which matplotlib brings) to stay under 200 KB.

    PYTHONPATH=. python3 scripts/status-screenshots.py [OUT_DIR]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PIL import Image  # noqa: E402

from tests.status_scene import Scene, lb_of, scene  # noqa: E402

WINDOW = "1200,1450"
MAX_BYTES = 200_000


def shoot(url: str, out: Path) -> None:
    profile = tempfile.mkdtemp(prefix="dnsd-shot-")
    try:
        subprocess.run(
            [str(shutil.which("chromium")), "--headless", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--window-size={WINDOW}", f"--screenshot={out}", url],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    Image.open(out).convert("RGB").quantize(colors=256).save(out, optimize=True)
    size = out.stat().st_size
    assert size < MAX_BYTES, f"{out}: {size} bytes"
    print(f"{out} ({size // 1024} KB)")


def settle(s: Scene, test: object) -> None:
    s.wait(test)  # type: ignore[arg-type]
    time.sleep(0.6)  # the status document is cached for half a second


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, scene(Path(tmp) / "scene") as s:
        settle(s, lambda doc: not lb_of(doc, "web")["failed_over"])
        shoot(s.url, out / "status-healthy.png")

        body = {"trickle_ratio": 1.0, "reason": "failover drill: eu maintenance", "for": "1h"}
        assert s.api("PUT", "/api/v1/overrides/load_balancers/web", body)[0] == 200
        settle(s, lambda doc: len(lb_of(doc, "web")["failed_over"]) == 14)
        shoot(s.url, out / "status-failed-over.png")
        assert s.api("DELETE", "/api/v1/overrides/load_balancers/web")[0] == 200

        body = {"state": "down", "reason": "INC-1234: eu storage degraded", "for": "2h"}
        assert s.api("PUT", "/api/v1/overrides/pools/eu", body)[0] == 200
        settle(s, lambda doc: lb_of(doc, "web")["failed_over"])
        shoot(s.url, out / "status-pool-down.png")


if __name__ == "__main__":
    main()
