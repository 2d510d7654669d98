"""The status page as an on-call cockpit, against a real `dnsd serve` with real HTTP
backends: rendered on the server from the status document, so a manual failover, an
override (with its reason and actor) and a real outage each show for what they are — in
headless Chromium with JavaScript on (the page refreshes itself), and off."""

from __future__ import annotations

import asyncio
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from tests.browser import Browser
from tests.status_scene import EUROPE, LONG_NAME, Scene, lb_of, scene

REFRESH_MS = 300
REGIONS = 14  # the 13 regions and clients without a location
LOADED = "document.readyState === 'complete'"
TILES = "[...document.querySelectorAll('section[data-lb=\"{lb}\"] g.tile')]"


class Tiles(HTMLParser):
    """Each load balancer's map tiles in the HTML as sent: {lb: {region: (pool, state, title)}}."""

    def __init__(self) -> None:
        super().__init__()
        self.maps: dict[str, dict[str, list[str]]] = {}
        self._lb: str | None = None
        self._tile: list[str] | None = None
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and a.get("data-lb"):
            self._lb = a["data-lb"]
            self.maps[self._lb] = {}
        elif tag == "g" and a.get("class") == "tile" and self._lb is not None:
            self._tile = [str(a["data-active"]), str(a["data-state"]), ""]
            self.maps[self._lb][str(a["data-region"])] = self._tile
        elif tag == "title" and self._tile is not None:
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag == "g":
            self._tile = None

    def handle_data(self, data: str) -> None:
        if self._in_title and self._tile is not None:
            self._tile[2] += data


def tiles_of(html: str) -> dict[str, dict[str, list[str]]]:
    parser = Tiles()
    parser.feed(html)
    return parser.maps


async def page_dom(url: str, javascript: bool) -> str:
    """The DOM headless Chromium builds from `url`, with scripts off or on — read through
    the DevTools DOM domain, which works with scripts off."""
    browser = await Browser("about:blank").connect()
    try:
        await browser.call("Emulation.setScriptExecutionDisabled", value=not javascript)
        await browser.call("Page.navigate", url=url)
        deadline = time.monotonic() + 15
        while True:
            # while the page loads, a node id can go stale: then ask again
            root = (await browser.call("DOM.getDocument", depth=-1)).get("root", {})
            found = await browser.call("DOM.getOuterHTML", nodeId=root.get("nodeId", 0))
            html = found.get("outerHTML", "")
            # the script element follows <main>: once parsed, the page is complete (a
            # half-parsed document serializes with its open elements closed)
            ready = "<script>" in html and (not javascript or "data-refreshes" in html)
            if ready:
                return str(html)
            assert time.monotonic() < deadline, html[:2000]
            await asyncio.sleep(0.1)
    finally:
        await browser.close()


async def wait_js(browser: Browser, expression: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := await browser.evaluate(expression)):
        assert time.monotonic() < deadline, await browser.evaluate("document.body.innerText")
        await asyncio.sleep(0.05)
    return value


def page_follows_status(s: Scene, html: str) -> None:
    """Every tile of every load balancer says the pool the status document says."""
    doc = s.status("?limit=10")
    maps = tiles_of(html)
    for lb in doc["load_balancers"]:
        shown = {region: tile[0] for region, tile in maps[lb["name"]].items()}
        said = {
            r: path.split(" -> ")[-1].removesuffix(" (fail open)")
            for r, path in lb["active"].items()
        }
        assert shown == said, lb["name"]


def test_manual_failover_shows_the_standby_pool_in_every_region(tmp_path: Path) -> None:
    with scene(tmp_path) as s:

        async def main() -> None:
            browser = await Browser(f"{s.url}?refresh={REFRESH_MS}").connect()
            try:
                await wait_js(
                    browser, LOADED + " && document.querySelector('#banner').dataset.level === 'ok'"
                )
                pools = await browser.evaluate(
                    TILES.format(lb="web") + ".map(t => t.dataset.active)"
                )
                assert pools == ["eu"] * REGIONS
                code, _ = s.api("PUT", "/api/v1/overrides/load_balancers/web",
                                {"trickle_ratio": 1.0, "reason": "failover drill"})  # fmt: skip
                assert code == 200
                # the page refreshes itself: every region of `web` on the standby, marked
                states = (
                    TILES.format(lb="web") + ".map(t => t.dataset.active + ' ' + t.dataset.state)"
                )
                await wait_js(browser, f"{states}.every(t => t === 'us manual')")
                text = await browser.evaluate(
                    "document.querySelector('section[data-lb=\"web\"]').innerText"
                )
                assert "www.example.com" in text and "failed over" in text
                assert "trickle 1.0 (manual failover)" in text and "failover drill" in text
                banner = await browser.evaluate("document.getElementById('banner').innerText")
                assert "14 regions failed over" in banner and "by oncall" in banner
                others = await browser.evaluate(
                    TILES.format(lb="api") + ".map(t => t.dataset.state)"
                )
                assert others == ["first"] * REGIONS  # api's own trickle is untouched
                page_follows_status(s, await browser.evaluate("document.documentElement.outerHTML"))
            finally:
                await browser.close()

        asyncio.run(main())


def test_pool_down_override_reads_as_an_override_and_an_outage_as_an_outage(
    tmp_path: Path,
) -> None:
    reason = "INC-1234: eu storage"
    with scene(tmp_path) as s:

        async def main() -> None:
            browser = await Browser(f"{s.url}?refresh={REFRESH_MS}").connect()
            try:
                await wait_js(
                    browser, LOADED + " && document.querySelector('#banner').dataset.level === 'ok'"
                )
                code, _ = s.api("PUT", "/api/v1/overrides/pools/eu",
                                {"state": "down", "reason": reason, "for": "2h"})  # fmt: skip
                assert code == 200
                await wait_js(
                    browser, "document.querySelector('#banner').dataset.level === 'manual'"
                )
                banner = await browser.evaluate("document.getElementById('banner').innerText")
                assert "pool eu down" in banner and reason in banner and "by oncall" in banner
                assert "UTC" in banner or "Z" in banner
                assert "0 backends down by probes" in banner  # nothing failed: it is an override
                web = await browser.evaluate(
                    TILES.format(lb="web")
                    + ".map(t => [t.dataset.active, t.dataset.state, t.querySelector('title').textContent])"
                )
                assert {(p, st) for p, st, _ in web} == {("us", "manual")}
                assert all(reason in title and "oncall" in title for _, _, title in web)
                api = await browser.evaluate(
                    TILES.format(lb="api")
                    + ".map(t => [t.dataset.region, t.dataset.active, t.dataset.state])"
                )
                moved = {region for region, pool, state in api if state == "manual"}
                assert moved == set(EUROPE) and all(p == "us" for _, p, _ in api)

                # a real outage of eu is told apart: red, "outage", no override named
                assert s.api("DELETE", "/api/v1/overrides/pools/eu")[0] == 200
                s.set_mode("eu-1", "503")
                s.set_mode("eu-2", "503")
                await wait_js(
                    browser, "document.querySelector('#banner').dataset.level === 'outage'"
                )
                states = TILES.format(lb="web") + ".map(t => t.dataset.state)"
                await wait_js(browser, f"{states}.every(s => s === 'failover')")
                said = await browser.evaluate(
                    "document.querySelector('section[data-lb=\"web\"] .lb-status').innerText"
                )
                assert "outage: eu cannot answer" in said and "override" not in said
                banner = await browser.evaluate("document.getElementById('banner').innerText")
                assert "2 backends down by probes" in banner
                page_follows_status(s, await browser.evaluate("document.documentElement.outerHTML"))
            finally:
                await browser.close()

        asyncio.run(main())


def test_the_page_says_the_same_without_javascript(tmp_path: Path) -> None:
    reason = 'INC-9 <script>alert("x")</script> & more'
    with scene(tmp_path) as s:
        code, _ = s.api("PUT", "/api/v1/overrides/pools/eu", {"state": "down", "reason": reason})
        assert code == 200
        s.wait(lambda doc: lb_of(doc, "web")["failed_over"])
        html = s.page()
        assert "loading…" not in html
        assert "<script>alert" not in html and "&lt;script&gt;alert(&quot;x&quot;)" in html
        maps = tiles_of(html)
        assert {(p, st) for p, st, _ in maps["web"].values()} == {("us", "manual")}
        assert all("oncall" in title for _, _, title in maps["web"].values())
        assert "www.example.com" in html and LONG_NAME in html
        assert 'data-level="manual"' in html and "by oncall" in html
        page_follows_status(s, html)
        fragment = s.page("?fragment=1")  # what the script fetches: the same facts
        assert tiles_of(fragment) == maps

        dom = asyncio.run(page_dom(s.url, javascript=False))
        assert 'data-refreshes="0"' not in dom  # the script did not run
        assert tiles_of(dom)["web"] == maps["web"]
        assert "pool eu down" in dom and "by oncall" in dom and "<script>alert" not in dom
        assert "Z" in dom.split('id="meta"')[1][:400]  # times are marked UTC
        with_js = asyncio.run(page_dom(s.url, javascript=True))
        assert 'data-refreshes="0"' in with_js and tiles_of(with_js)["web"] == maps["web"]

        # a drained backend: said as an override with its reason and actor, not a failure
        body = {"state": "drain", "reason": "kernel upgrade", "for": "30m"}
        assert s.api("PUT", "/api/v1/overrides/backends/us/us-1", body)[0] == 200
        time.sleep(0.6)  # the status document is computed at most twice a second
        html = s.page()
        row = html.split('data-backend="us/us-1"')[1].split("</tr>")[0]
        assert 'class="state st-manual"' in row and "drain (override)" in row
        assert "kernel upgrade" in row and "by oncall" in row and "unhealthy" not in row
        assert 'data-fact="backends-drained"><b>1</b>' in html

        # paging and search without JavaScript: plain links and a GET form
        first = s.page("?limit=1")
        assert "load balancers 1–1 of 3" in first and 'href="?limit=1&amp;offset=1"' in first
        found = s.page("?lb=www.example")  # a DNS name finds its load balancer
        assert list(tiles_of(found)) == ["web"]
