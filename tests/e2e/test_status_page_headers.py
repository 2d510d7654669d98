"""The admin server's answers carry their security headers (a real `dnsd serve`, real HTTP):
the status page a strict Content-Security-Policy (its own style and script by hash, nothing
else inline, no framing), `X-Frame-Options`, `Referrer-Policy`; every answer, JSON and errors
included, `X-Content-Type-Options: nosniff`. And the page still works under that policy in
headless Chromium: styled, refreshing itself, no violation reported."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.browser import Browser
from tests.status_scene import scene

REFRESH_MS = 200


def _get(url: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode()


def _directives(csp: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in (p.strip() for p in csp.split(";")) if d}


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_security_headers_on_every_admin_answer(tmp_path: Path) -> None:
    with scene(tmp_path) as s:
        for path in ("", "?fragment=1"):
            code, headers, html = _get(s.url + path)
            assert code == 200 and headers["content-type"].startswith("text/html")
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["x-frame-options"] == "DENY"
            assert headers["referrer-policy"] == "no-referrer"
            csp = _directives(headers["content-security-policy"])
            assert csp["default-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"]
            assert csp["base-uri"] == ["'none'"] and csp["connect-src"] == ["'self'"]
            assert "'unsafe-inline'" not in headers["content-security-policy"]
            if not path:  # the page's one style and one script are the hashed ones
                styles = re.findall(r"<style>(.*?)</style>", html, re.S)
                scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
                assert csp["style-src"] == [_sha(styles[0])] and len(styles) == 1
                assert csp["script-src"] == [_sha(scripts[0])] and len(scripts) == 1
            assert " style=" not in html  # no inline style attribute the policy would block
        for path in ("api/v1/status", "healthz", "metrics", "api/v1/nothing-here"):
            code, headers, _ = _get(s.url + path)
            assert code == (404 if "nothing" in path else 200), path
            assert headers["x-content-type-options"] == "nosniff", path
            assert "content-security-policy" not in headers, path  # HTML only


def test_the_page_works_under_its_policy(tmp_path: Path) -> None:
    with scene(tmp_path) as s:

        async def main() -> None:
            browser = await Browser(f"{s.url}?refresh={REFRESH_MS}").connect()
            try:
                deadline = time.monotonic() + 15
                ran = "document.getElementById('banner') && document.body.dataset.refreshes"
                while not await browser.evaluate(ran):  # the hashed script ran
                    assert time.monotonic() < deadline, await browser.evaluate("location.href")
                    await asyncio.sleep(0.05)
                await browser.evaluate(
                    "window.violations = [];"
                    "document.addEventListener('securitypolicyviolation',"
                    " e => window.violations.push(e.violatedDirective + ' ' + e.blockedURI))"
                )
                start = int(await browser.evaluate("document.body.dataset.refreshes"))
                s.set_mode("eu-1", "503")  # the page changes: swapped-in HTML, new states
                s.set_mode("eu-2", "503")
                while await browser.evaluate(
                    "document.querySelector('#banner').dataset.level"
                ) != "outage" or int(await browser.evaluate("document.body.dataset.refreshes")) < (
                    start + 3
                ):
                    assert time.monotonic() < deadline + 15, await browser.evaluate(
                        "document.body.innerText"
                    )
                    await asyncio.sleep(0.1)
                assert await browser.evaluate("window.violations") == []
                # the hashed stylesheet applies: the red banner edge, the swatches' size
                assert (
                    await browser.evaluate(
                        "getComputedStyle(document.getElementById('banner')).borderLeftWidth"
                    )
                    == "8px"
                )
                swatch = await browser.evaluate(
                    "(() => { const r = document.querySelector('.legend svg.sw rect');"
                    " return [getComputedStyle(r.parentNode).width, r.getAttribute('fill')] })()"
                )
                assert swatch[0] != "auto" and float(swatch[0].removesuffix("px")) > 5, swatch
                assert re.fullmatch(r"#[0-9a-f]{6}", swatch[1]), swatch
                # the banner and the load balancer's heading can come a refresh apart
                heading = "document.querySelector('section[data-lb=\"web\"] h3').innerText"
                while "outage since" not in await browser.evaluate(heading):
                    assert time.monotonic() < deadline + 30, await browser.evaluate(heading)
                    await asyncio.sleep(0.1)
            finally:
                await browser.close()

        asyncio.run(main())
