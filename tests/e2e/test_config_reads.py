"""A read-only token cannot stall serving: against a 60,000-record
directory, three clients reading the config API as fast as they can — pages of
GET /api/v1/config and single entries — while DNS is asked every 20 ms: no answer is lost
and none is slow, each page holds at most 10,000 names, and the pages add up to the
whole zone."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from dnslib import DNSRecord

from tests.attackers import request_from
from tests.dnsclient import udp_raw
from tests.processes import DnsdProcess

READER = "config-reader-0123456789"
RECORDS = 60_000
READ_S = 15.0


def big_zone(path: Path) -> None:
    lines = ["zone: big.test", "soa: {mname: ns1.big.test., rname: h.big.test., minimum: 60}",
             "records:", '  "@": {NS: ns1.big.test.}', "  ns1: {A: 127.0.0.1}"]  # fmt: skip
    lines += [f"  h{i:05d}: {{A: 10.0.{i // 256 % 256}.{i % 256}}}" for i in range(RECORDS)]
    path.write_text("\n".join(lines) + "\n")


def test_config_reads_of_a_60000_record_directory_do_not_stall_dns(tmp_path: Path) -> None:
    (tmp_path / "zones").mkdir()
    big_zone(tmp_path / "zones" / "big.yaml")
    server_file = tmp_path / "dnsd.yaml"
    digest = hashlib.sha256(READER.encode()).hexdigest()
    server_file.write_text(f"tokens:\n  - {{name: reader, scope: read, sha256: {digest}}}\n")
    args = ("--config", str(server_file), "--rrl-rate", "0")
    with DnsdProcess(tmp_path / "zones", *args, start_timeout_s=180) as dnsd:
        stop = threading.Event()
        rtts: list[float] = []
        lost: list[str] = []
        reads = [0]
        errors: list[str] = []

        def ask_dns() -> None:
            i = 0
            while not stop.is_set():
                name = f"h{i % RECORDS:05d}.big.test"
                started = time.monotonic()
                raw = udp_raw(dnsd.port, DNSRecord.question(name).pack(), timeout=1.0)
                if raw is None or not DNSRecord.parse(raw).rr:
                    lost.append(name)
                else:
                    rtts.append(time.monotonic() - started)
                i += 7919
                time.sleep(0.02)

        def read_config(k: int) -> None:
            j = 0
            while not stop.is_set():
                if j % 2:
                    path = f"/api/v1/config/zones/big.test/records/h{(j * 131 + k) % RECORDS:05d}"
                else:
                    path = f"/api/v1/config?offset={(j * 10_000 + k * 3_000) % RECORDS}"
                status, body = request_from("127.0.0.1", dnsd.admin_port, "GET", path,
                                            token=READER, timeout=120)  # fmt: skip
                if status != 200:
                    errors.append(f"{path}: {status}")
                elif (
                    "zones" in body
                    and len(body["zones"].get("big.test", {}).get("records", {})) > 10_000
                ):
                    errors.append(f"{path}: a page over 10,000 names")
                reads[0] += 1
                j += 1

        dns = threading.Thread(target=ask_dns)
        readers = [threading.Thread(target=read_config, args=(k,)) for k in range(3)]
        dns.start()
        time.sleep(1.0)
        for thread in readers:
            thread.start()
        time.sleep(READ_S)
        stop.set()
        for thread in (dns, *readers):
            thread.join(130)
        names: dict[str, object] = {}
        offset: int | None = 0
        while offset is not None:
            status, page = request_from("127.0.0.1", dnsd.admin_port, "GET",
                                        f"/api/v1/config?zone=big.test&offset={offset}",
                                        token=READER)  # fmt: skip
            assert status == 200
            names.update(page["zones"]["big.test"]["records"])
            offset = page.get("next_offset")
        assert len(names) == RECORDS + 2 and names["h59999"] == {"A": "10.0.234.95"}
    rtts.sort()
    p99 = rtts[int(len(rtts) * 0.99)]
    print(f"config reads: {reads[0]} reads in {READ_S:.0f} s; DNS {len(rtts)} answers, "
          f"{len(lost)} lost, p99 {p99 * 1000:.1f} ms, max {rtts[-1] * 1000:.1f} ms")  # fmt: skip
    assert not errors, errors[:5]
    assert reads[0] >= 20
    assert not lost, lost[:5]
    assert p99 < 0.4  # the probe timeout that a stall had pushed DNS past
