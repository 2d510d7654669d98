"""The status page in headless Chromium: it renders pools and states, and shows a backend
going down within two refreshes."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from dnsd.drill.backend import DemoBackend
from tests.browser import Browser
from tests.conftest import ServerThread
from tests.health_harness import write_config

REFRESH_MS = 500
STATE = "document.querySelector('[data-backend=\"p/b0\"]')?.dataset.state ?? 'missing'"


def test_status_page_shows_pools_and_a_backend_going_down(tmp_path: Path) -> None:
    monitor = "type: http\npath: /healthz\ninterval: 100ms\ntimeout: 300ms\nunhealthy_threshold: 2\nsources: [WNAM, ENAM, WEU]\n"
    srv = ServerThread(write_config(tmp_path / "z", monitor, [("b0", 1), ("b1", 1)]))
    srv.run_loop()
    backends = [srv.call(DemoBackend(f"b{i}", control_port=None).start()) for i in range(2)]
    write_config(tmp_path / "z", monitor, [(b.name, b.port) for b in backends])
    srv.call(srv.server.start())
    assert srv.reload()

    async def main() -> None:
        browser = await Browser(
            f"http://127.0.0.1:{srv.admin_port}/?refresh={REFRESH_MS}"
        ).connect()
        try:
            deadline = time.monotonic() + 15
            while await browser.evaluate(STATE) != "healthy":
                assert time.monotonic() < deadline, await browser.evaluate(
                    "document.body.innerText"
                )
                await asyncio.sleep(0.1)
            text = await browser.evaluate("document.body.innerText")
            assert "p" in text and "b0" in text and "b1" in text and "probe WEU" in text
            pool_state = await browser.evaluate(
                "document.querySelector('[data-pool=\"p\"]').dataset.state"
            )
            assert pool_state == "healthy"
            assert "· ready ·" in await browser.evaluate(
                "document.getElementById('meta').innerText"
            )

            srv.call(backends[0].set_mode("503"))
            while srv.server.store.view.backends[("p", "b0")].healthy:
                await asyncio.sleep(0.02)
            down_at_refresh = int(await browser.evaluate("document.body.dataset.refreshes"))
            while await browser.evaluate(STATE) != "unhealthy":
                await asyncio.sleep(0.05)
            shown_at_refresh = int(await browser.evaluate("document.body.dataset.refreshes"))
            assert shown_at_refresh - down_at_refresh <= 2
            events = await browser.evaluate("document.getElementById('events').innerText")
            assert "unhealthy" in events and "p/b0" in events
            shot = Path(os.environ.get("DNSD_SCREENSHOT", tmp_path / "status.png"))
            await browser.screenshot(shot)
            assert shot.stat().st_size > 10_000
        finally:
            await browser.close()

    try:
        asyncio.run(main())
    finally:
        for b in backends:
            srv.call(b.stop())
        srv.stop()
