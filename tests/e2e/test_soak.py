"""A minute of mixed hostile traffic against one `dnsd serve`.

Forged and malformed health bus messages, idle and half-sent admin connections, odd DNS
names, a flood of random DO=1 names in a signed zone, wrong tokens and a reload storm, 100
admin connections that pipeline requests and never read, and a stream of wrong tokens from
the operator's own address, all at once — while a client checks that every answer stays
correct and the valid token is never refused. Afterwards: memory bounded, and the log grew
by less than 1 MB.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable

from dnslib import EDNS0, DNSRecord

from dnsd.cluster.health_channel import OBS_CHANNEL, OVERRIDES_CHANNEL
from dnsd.drill.backend import DemoBackend
from tests.admin_client import http
from tests.attackers import PipeliningJammer
from tests.dnsclient import udp_raw
from tests.integration.test_hostile import monitored_zone, raw_query
from tests.loop_thread import LoopThread
from tests.processes import DnsdProcess, Redis

SOAK_S = float(os.environ.get("DNSD_SOAK_SECONDS", "60"))
TOKEN = "soak-token"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(x for x in status if x.startswith("VmRSS:"))
    return int(line.split()[1])


def run_for(seconds: float, stop: threading.Event, step: Callable[[], None]) -> threading.Thread:
    def loop() -> None:
        deadline = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # the attacker's own sockets may fail
                step()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_a_minute_of_hostile_traffic(tmp_path) -> None:
    loop = LoopThread()
    backend = loop.call(DemoBackend("b1", host="127.0.0.71", control_port=None).start())
    (tmp_path / "zones").mkdir()
    (tmp_path / "zones" / "soak.yaml").write_text(
        monitored_zone("soak.test", backend.port) + "dnssec: {algorithm: 13}\n"
    )  # signed: random DO=1 names are each signed
    (tmp_path / "cluster.key").write_text("soak-cluster-key-0123456789")
    redis = Redis().start()
    rng = random.Random(16)
    stop = threading.Event()
    wrong: list[str] = []
    checked = [0]
    refused_valid: list[int] = []  # statuses other than 200 for the valid token
    valid_sent = [0]
    dnsd = DnsdProcess(
        tmp_path / "zones", "--redis", f"redis://127.0.0.1:{redis.port}/0", "--node", "a",
        "--pop-region", "WEU", "--redis-key-file", str(tmp_path / "cluster.key"),
        env={"DNSD_ADMIN_TOKEN": TOKEN}, nofile=1024,
    )  # fmt: skip
    held: list[socket.socket] = []
    try:
        with dnsd:
            dnsd.wait_for_log("sharing health as node")
            assert udp_raw(dnsd.port, DNSRecord.question("www.soak.test").pack()) is not None

            def check() -> None:
                for name, want in (
                    ("www.soak.test", "127.0.0.71"),
                    ("x.wild.soak.test", "192.0.2.99"),
                ):
                    raw = udp_raw(dnsd.port, DNSRecord.question(name).pack(), timeout=2.0)
                    got = [str(rr.rdata) for rr in DNSRecord.parse(raw).rr] if raw else None
                    checked[0] += 1
                    if got != [want]:
                        wrong.append(f"{name}: {got}")
                time.sleep(0.02)

            def odd_names() -> None:
                labels = [bytes(rng.choice(b"abc.\\-_*") for _ in range(rng.randint(1, 8)))
                          for _ in range(rng.randint(1, 4))]  # fmt: skip
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    for _ in range(20):
                        s.sendto(raw_query([*labels, b"soak", b"test"]), ("127.0.0.1", dnsd.port))
                time.sleep(0.01)

            def signed_random_names() -> None:  # each one a new signature (compact denial)
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    for _ in range(50):
                        query = DNSRecord.question(f"r{rng.getrandbits(48):x}.soak.test")
                        query.add_ar(EDNS0(flags="do"))
                        s.sendto(query.pack(), ("127.0.0.1", dnsd.port))
                time.sleep(0.01)

            def forged_bus() -> None:
                junk = rng.choice([
                    "not json", json.dumps({"body": json.dumps({"node": "b", "pools": {"main": "down"},
                                                               "updated_at": 1e18})}),
                    json.dumps({"body": "{}", "mac": "00" * 32}), "[" * 5000,
                ])  # fmt: skip
                channel = rng.choice([OBS_CHANNEL, OVERRIDES_CHANNEL])
                subprocess.run(["redis-cli", "-p", str(redis.port), "publish", channel, junk],
                               capture_output=True, check=False)  # fmt: skip

            def idle_admin() -> None:
                s = socket.create_connection(("127.0.0.1", dnsd.admin_port), timeout=1)
                if rng.random() < 0.5:
                    s.sendall(b"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends
                held.append(s)
                if len(held) > 400:
                    held.pop(0).close()
                time.sleep(0.002)

            def reload_storm() -> None:
                if rng.random() < 0.2:
                    dnsd.signal(signal.SIGHUP)
                else:
                    token = TOKEN if rng.random() < 0.7 else "wrong"
                    status, _ = http(dnsd.admin_port, "POST", "/api/v1/reload", {}, token)
                    if token == TOKEN:
                        valid_sent[0] += 1
                        if status != 200:
                            refused_valid.append(status)
                time.sleep(0.05)

            def wrong_tokens() -> None:  # from 127.0.0.1, like the valid ones
                http(dnsd.admin_port, "PUT", "/api/v1/overrides/pools/main", {"state": "down"},
                     f"guess-{rng.random()}")  # fmt: skip
                time.sleep(0.05)

            jammer = PipeliningJammer(dnsd.admin_port, [f"127.0.5.{i}" for i in range(1, 11)], 100)
            jammer.__enter__()
            threads = [run_for(SOAK_S, stop, step)
                       for step in (check, odd_names, signed_random_names, forged_bus, idle_admin,
                                    reload_storm, wrong_tokens)]  # fmt: skip
            time.sleep(min(10.0, SOAK_S / 3))
            rss_early = rss_kib(dnsd.proc.pid)  # type: ignore[union-attr]
            log_early = len(dnsd.output)
            for thread in threads:
                thread.join(SOAK_S + 30)
            jammer.__exit__()
            rss_late = rss_kib(dnsd.proc.pid)  # type: ignore[union-attr]
            status, body = http(dnsd.admin_port, "GET", "/api/v1/status")
            assert status == 200 and body["bus"]["connected"] is True, (status, body)
            assert body["overrides"]["pools"] == {}  # no forged override got in
        grown = len(dnsd.output) - log_early
        print(f"soak: {checked[0]} checks, {len(wrong)} wrong or lost, RSS {rss_early} -> "
              f"{rss_late} KiB, log +{grown} bytes, valid token {valid_sent[0]} requests "
              f"({len(refused_valid)} refused), jammer {jammer.sent} bytes")  # fmt: skip
        assert not wrong, wrong[:10]
        # the valid token was used all along (each reload takes a while: ~5 a second at best)
        assert valid_sent[0] > SOAK_S * 2 and not refused_valid, refused_valid[:10]
        assert jammer.sent > 1_000_000
        assert checked[0] > SOAK_S * 20  # the checker really ran
        assert rss_late - rss_early < 64 * 1024, (rss_early, rss_late)  # KiB: bounded
        assert grown < 1_000_000
        assert "Traceback" not in dnsd.output
    finally:
        stop.set()
        for s in held:
            s.close()
        redis.kill()
        loop.call(backend.stop())
        loop.close()
