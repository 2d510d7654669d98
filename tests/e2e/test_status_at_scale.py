"""Status at scale: /api/v1/status pages and filters (lb=, pool=, limit=,
offset=, the totals) and answers fast with many load balancers; the status page pages and
searches, in headless Chromium, against a real `dnsd serve`."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.admin_client import http
from tests.browser import Browser
from tests.churn import start_backends, write_config
from tests.processes import DnsdProcess

NAMES = 2_000
PAGE = "document.getElementById('page')?.innerText"


def write(directory: Path) -> Path:
    lines = ["zone: many.test", "soa: {mname: ns1.many.test., rname: h.many.test.}", "records:",
             '  "@": {NS: ns1.many.test.}', "  ns1: {A: 192.0.2.1}"]  # fmt: skip
    lines += [f"  n{i}: {{lb: web{i}}}" for i in range(NAMES)]
    lines += ["pools:"]
    lines += [f"  {p}: {{backends: [{{name: {p}1, address: 192.0.2.{10 + k}}}]}}"
              for k, p in enumerate(["fra", "iad", "sin"])]  # fmt: skip
    lines += ["load_balancers:"]
    lines += [
        f"  web{i}: {{default_pools: [{'fra' if i % 2 else 'iad'}, sin]}}" for i in range(NAMES)
    ]
    directory.mkdir()
    (directory / "many.yaml").write_text("\n".join(lines) + "\n")
    return directory


def test_status_pages_filters_and_stays_fast(tmp_path: Path) -> None:
    with DnsdProcess(write(tmp_path / "z")) as dnsd:
        port = dnsd.admin_port
        started = time.monotonic()
        code, first = http(port, "GET", "/api/v1/status")
        took = time.monotonic() - started
        assert code == 200 and took < 10, (
            took
        )  # one page is built (speed: bench/monitored_scale.py)
        assert first["total"] == {"pools": 3, "load_balancers": NAMES}
        summary = first["summary"]  # over the whole configuration, not the page
        assert summary["load_balancers"] == NAMES and summary["regions_failed_over"] == 0
        assert first["load_balancers"][0]["names"] == ["n0.many.test"]
        assert len(first["load_balancers"]) == 100 and first["limit"] == 100
        assert first["load_balancers"][0]["name"] == "web0"
        assert set(first["load_balancers"][0]["active"]) >= {"WEU", "ENAM", "unknown"}
        _, last = http(port, "GET", f"/api/v1/status?offset={NAMES - 30}&limit=50")
        assert [lb["name"] for lb in last["load_balancers"]][-1] == f"web{NAMES - 1}"
        assert len(last["load_balancers"]) == 30 and last["offset"] == NAMES - 30
        _, found = http(port, "GET", "/api/v1/status?lb=web19&limit=1000")
        assert found["total"]["load_balancers"] == 111  # web19, web190-199, web1900-1999
        _, by_name = http(port, "GET", "/api/v1/status?lb=n1999.many")  # a DNS name
        assert [lb["name"] for lb in by_name["load_balancers"]] == ["web1999"]
        _, by_pool = http(port, "GET", "/api/v1/status?pool=fra&limit=5")
        assert by_pool["total"] == {"pools": 1, "load_balancers": NAMES // 2}
        assert all(lb["default_pools"][0] == "fra" for lb in by_pool["load_balancers"])
        for bad in ("limit=0", "limit=x", "offset=-1", "limit=10001", "lb=" + "a" * 300):
            assert http(port, "GET", f"/api/v1/status?{bad}")[0] == 400, bad

        async def page() -> None:
            browser = await Browser(f"http://127.0.0.1:{port}/?lb=web19&limit=50").connect()
            try:
                deadline = time.monotonic() + 15
                text = ""
                rows = 0
                # The page as loaded, or as its next refresh swaps it in: 50 rows of 111.
                while "of 111" not in text or rows != 50:
                    assert time.monotonic() < deadline, (rows, text)
                    await asyncio.sleep(0.1)
                    loaded = await browser.evaluate("document.readyState") == "complete"
                    text = (await browser.evaluate(PAGE) or "") if loaded else ""
                    rows = await browser.evaluate("document.querySelectorAll('[data-lb]').length")
                assert "1–50 of 111" in text and "next" in text
                search = await browser.evaluate("document.querySelector('[name=lb]').value")
                assert search == "web19"
            finally:
                await browser.close()

        asyncio.run(page())


def test_many_monitored_names_start_reload_and_keep_answering(tmp_path: Path) -> None:
    """The scaled-down issue-36 benchmark (bench/monitored_scale.py has the 10,000-name
    figures): 2,000 load-balanced names over monitored pools start, probe every backend
    healthy, report status pages, and reload with one record changed while every DNS query
    asked meanwhile is answered."""
    import signal
    import threading

    from tests.dnsclient import ask
    from tests.loop_thread import LoopThread

    loop = LoopThread()
    backends = start_backends(loop)
    try:
        write_config(tmp_path, NAMES, {n: b.port for n, b in backends.items()})
        with DnsdProcess(tmp_path, "--rrl-rate", "0", start_timeout_s=60) as dnsd:
            deadline = time.monotonic() + 30
            while True:
                _, status = http(dnsd.admin_port, "GET", "/api/v1/status?limit=1")
                probed = [b["probed"] for p in status["pools"] for b in p["backends"]]
                if probed and all(s == "healthy" for s in probed):
                    break
                assert time.monotonic() < deadline, probed
                time.sleep(0.2)
            assert status["total"]["load_balancers"] == NAMES
            assert http(dnsd.admin_port, "GET", "/readyz")[0] == 200
            lost: list[int] = []
            stop = threading.Event()

            def asker() -> None:
                i = 0
                while not stop.is_set():
                    try:
                        assert ask(dnsd.port, f"n{i % NAMES}.churn.test").rr
                    except AssertionError:
                        lost.append(i)
                    i += 1
                    time.sleep(0.02)

            thread = threading.Thread(target=asker)
            thread.start()
            zone = tmp_path / "churn.test.yaml"
            zone.write_text(zone.read_text().replace("ns1: {A: 192.0.2.1}", "ns1: {A: 192.0.2.7}"))
            assert dnsd.proc is not None
            dnsd.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 60
            while http(dnsd.admin_port, "GET", "/readyz")[1]["generation"] < 2:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            time.sleep(0.5)
            stop.set()
            thread.join()
            assert lost == [], f"{len(lost)} queries unanswered during the reload"
            assert str(ask(dnsd.port, "ns1.churn.test").rr[0].rdata) == "192.0.2.7"
    finally:
        for b in backends.values():
            loop.call(b.stop())
        loop.close()
