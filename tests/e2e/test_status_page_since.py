"""Since when a probe-driven outage lasts, in sight: a real `dnsd serve` with real HTTP
backends (tests/status_scene.py); both eu backends answer 503, and the page as sent says in
its banner and in each failed-over load balancer's heading when it began and for how long —
not only inside the collapsed "regions as text"."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

from tests.status_scene import lb_of, scene

SINCE = re.compile(r"since (\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ) \(for (\d+) (s|min)\)")


class Visible(HTMLParser):
    """The text of the banner's headline and of each load balancer's heading."""

    def __init__(self) -> None:
        super().__init__()
        self.headline = ""
        self.headings: dict[str, str] = {}
        self._lb: str | None = None
        self._into: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and a.get("data-lb"):
            self._lb = a["data-lb"]
        elif tag == "p" and a.get("class") == "headline":
            self._into = "headline"
        elif tag == "h3" and self._lb is not None:
            self._into = "h3"
            self.headings[self._lb] = ""

    def handle_endtag(self, tag: str) -> None:
        if (tag, self._into) in (("p", "headline"), ("h3", "h3")):
            self._into = None

    def handle_data(self, data: str) -> None:
        if self._into == "headline":
            self.headline += data
        elif self._into == "h3" and self._lb is not None:
            self.headings[self._lb] += data


def _began(text: str) -> tuple[float, int]:
    found = SINCE.search(text)
    assert found, text
    at = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    return at, int(found[2]) * (60 if found[3] == "min" else 1)


def test_the_banner_and_the_lb_heading_say_since_when(tmp_path: Path) -> None:
    with scene(tmp_path) as s:
        before = time.time()
        s.set_mode("eu-1", "503")
        s.set_mode("eu-2", "503")
        doc = s.wait(lambda d: all("WEU" in lb_of(d, lb)["failed_over"] for lb in ("web", "api")))
        assert doc["summary"]["backends_down"] == 2
        time.sleep(1.2)  # so "for N s" is at least 1
        parsed = Visible()
        parsed.feed(s.page())
        after = time.time()

        assert parsed.headline.startswith("Outage since "), parsed.headline
        at, lasted = _began(parsed.headline)
        # the first eu backend found down by its probes (a whole second: the text has no ms)
        assert int(before) <= at <= after, (before, parsed.headline, after)
        assert 1 <= lasted <= after - at + 1

        for lb in ("web", "api"):  # both failed over from eu to us
            heading = parsed.headings[lb]
            assert "outage since " in heading, heading
            lb_at, lb_lasted = _began(heading)
            assert at <= lb_at <= after and 1 <= lb_lasted <= after - lb_at + 1, heading
        # a load balancer still on its first choice says no outage
        s.set_mode("eu-1", "ok")
        s.set_mode("eu-2", "ok")
        s.wait(  # both back, and no backend down by its probes: the outage is over
            lambda d: (
                not any(lb_of(d, lb)["failed_over"] for lb in ("web", "api"))
                and d["summary"]["backends_down"] == 0
            )
        )
        parsed = Visible()
        parsed.feed(s.page())
        assert "since" not in parsed.headline and "since" not in parsed.headings["web"]
