"""NOTIFY (RFC 1996): sent to a zone's targets on a serial change, signed with the zone's
key, retried until answered, at most one round per zone per second with the latest
serial. The target is a real UDP socket that answers like a secondary (dnspython)."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import threading
import time
from pathlib import Path

import dns.message
import dns.opcode
import dns.tsigkeyring
import pytest

from dnsd.loading import load_snapshot
from dnsd.snapshot import SnapshotHolder, with_serials
from dnsd.xfr import notify
from dnsd.xfr.notify import NotifySender

SECRET = base64.b64encode(bytes(range(32))).decode()
RING = dns.tsigkeyring.from_text({"xfr-key": SECRET})


class Secondary:
    """Answers every NOTIFY after ignoring the first `ignore` of them; records what came."""

    def __init__(self, ignore: int = 0, delay: float = 0.0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.ignore = ignore
        self.delay = delay  # seconds before each answer (a secondary far away)
        self.received: list[tuple[float, int, bool]] = []  # (time, serial, signed)
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop:
            try:
                data, peer = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            message = dns.message.from_wire(data, keyring=RING)
            assert message.opcode() == dns.opcode.NOTIFY
            self.received.append((time.monotonic(), message.answer[0][0].serial, message.had_tsig))
            if len(self.received) > self.ignore:
                time.sleep(self.delay)
                self.sock.sendto(dns.message.make_response(message).to_wire(), peer)

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


def holder_for(tmp_path: Path, port: int) -> SnapshotHolder:
    (tmp_path / "xfr.b64").write_text(SECRET)
    (tmp_path / "z.yaml").write_text(
        "tsig_keys:\n  xfr-key: {secret_file: xfr.b64}\n"
        "zone: z.example\nsoa: {mname: ns.z.example., rname: h.z.example., serial: 10}\n"
        'records:\n  "@": {NS: ns.z.example.}\n  ns: {A: 192.0.2.1}\n'
        f'transfer: {{allow: [127.0.0.1/32], keys: [xfr-key]}}\nnotify: ["127.0.0.1:{port}"]\n'
    )
    return SnapshotHolder(load_snapshot(tmp_path, 1))


def test_changes_in_a_burst_give_one_round_per_second_with_the_latest_serial(
    tmp_path: Path,
) -> None:
    secondary = Secondary()
    holder = holder_for(tmp_path, secondary.port)

    async def burst() -> None:
        sender = NotifySender(holder)
        for serial in range(11, 21):  # ten changes within a few milliseconds
            holder.swap(with_serials(holder.current, {"z.example.": serial}))
            sender.changed("z.example.", serial)
            await asyncio.sleep(0.005)
        await asyncio.sleep(1.6)
        await sender.stop()

    try:
        asyncio.run(burst())
    finally:
        secondary.close()
    serials = [serial for _, serial, _ in secondary.received]
    assert serials and serials[-1] == 20  # the latest serial always goes out
    assert len(serials) <= 2  # one round at once, the next a second later at the earliest
    assert all(signed for _, _, signed in secondary.received)  # signed with transfer.keys[0]
    if len(secondary.received) == 2:
        assert secondary.received[1][0] - secondary.received[0][0] >= 0.9


def test_an_unanswered_notify_is_sent_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dnsd.xfr.notify")
    secondary = Secondary(ignore=2)  # the first two tries get no answer
    holder = holder_for(tmp_path, secondary.port)

    async def once() -> NotifySender:
        sender = NotifySender(holder)
        holder.swap(with_serials(holder.current, {"z.example.": 11}))
        sender.changed("z.example.", 11)
        await asyncio.sleep(4.5)  # tries after 0, 1 and 3 s
        await sender.stop()
        return sender

    try:
        sender = asyncio.run(once())
    finally:
        secondary.close()
    assert [serial for _, serial, _ in secondary.received] == [11, 11, 11]
    assert sender.answered == 1
    lines = [line for _, line in _lines(caplog, secondary.port)]
    assert len(lines) == 2, lines  # silent after the first try; answering again
    assert "no answer within 1 s; trying again" in lines[0]
    assert "NOERROR, answered again after 2 unanswered tries" in lines[1]
    assert sender.outcomes == {("z.example.", f"127.0.0.1:{secondary.port}", "noerror"): 1}


def _lines(caplog: pytest.LogCaptureFixture, port: int) -> list[tuple[float, str]]:
    """The NOTIFY log lines about the secondary at `port`: (time, text)."""
    return [
        (record.created, record.getMessage())
        for record in caplog.records
        if record.name == "dnsd.xfr.notify" and f"port {port}" in record.getMessage()
    ]


def test_a_dead_secondary_is_logged_within_seconds_and_once_per_episode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dnsd.xfr.notify")
    secondary = Secondary(ignore=10**9)  # a real socket that takes NOTIFY and never answers
    holder = holder_for(tmp_path, secondary.port)
    start = time.time()

    async def changes() -> NotifySender:
        sender = NotifySender(holder)
        holder.swap(with_serials(holder.current, {"z.example.": 11}))
        sender.changed("z.example.", 11)
        await asyncio.sleep(2.5)  # the first try timed out at 1 s; the second is waiting
        for serial in range(12, 20):  # newer serials supersede round after round
            holder.swap(with_serials(holder.current, {"z.example.": serial}))
            sender.changed("z.example.", serial)
            await asyncio.sleep(0.4)
        await sender.stop()
        return sender

    try:
        sender = asyncio.run(changes())
    finally:
        secondary.close()
    lines = _lines(caplog, secondary.port)
    assert lines, "a NOTIFY to a dead secondary logged nothing"
    first_at, first = lines[0]
    assert first_at - start < 2.0 and "serial 11" in first and "no answer within 1 s" in first
    # One line when it went silent, one when a round ended without its answer; the rounds
    # that follow (superseded again and again) write nothing more.
    assert len(lines) == 2, lines
    assert "superseded by serial 12" in lines[1][1] and "not logged again" in lines[1][1]
    secondary_name = f"127.0.0.1:{secondary.port}"
    assert sender.outcomes[("z.example.", secondary_name, "superseded")] >= 3
    assert len(secondary.received) >= 4  # it was really being sent to all along


def test_a_dead_secondary_under_changes_faster_than_a_try_is_still_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Changes every 0.3 s: a newer round still waits for the older one's first try (its
    answer or its 1 s timeout), so the dead secondary is said to be silent after a second,
    and the round it lost once; nothing more however many rounds follow."""
    caplog.set_level(logging.INFO, logger="dnsd.xfr.notify")
    secondary = Secondary(ignore=10**9)
    holder = holder_for(tmp_path, secondary.port)
    start = time.time()

    async def changes() -> NotifySender:
        sender = NotifySender(holder)
        for serial in range(11, 25):
            holder.swap(with_serials(holder.current, {"z.example.": serial}))
            sender.changed("z.example.", serial)
            await asyncio.sleep(0.3)
        await sender.stop()
        return sender

    try:
        sender = asyncio.run(changes())
    finally:
        secondary.close()
    lines = _lines(caplog, secondary.port)
    assert len(lines) == 2, lines
    assert lines[0][0] - start < 2.0 and "serial 11" in lines[0][1]
    assert "no answer within 1 s" in lines[0][1] and "superseded by serial" in lines[1][1]
    superseded = sender.outcomes[("z.example.", f"127.0.0.1:{secondary.port}", "superseded")]
    assert superseded >= 2 and len(secondary.received) >= 3


def test_a_round_given_up_is_logged_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="dnsd.xfr.notify")
    monkeypatch.setattr(notify, "TRIES", 2)  # tries at 0 and 1 s, given up at 3 s
    secondary = Secondary(ignore=10**9)
    holder = holder_for(tmp_path, secondary.port)

    async def once() -> NotifySender:
        sender = NotifySender(holder)
        holder.swap(with_serials(holder.current, {"z.example.": 11}))
        sender.changed("z.example.", 11)
        await asyncio.sleep(3.4)
        await sender.stop()
        return sender

    try:
        sender = asyncio.run(once())
    finally:
        secondary.close()
    lines = [line for _, line in _lines(caplog, secondary.port)]
    assert len(lines) == 2, lines
    assert "no answer after 2 tries: given up" in lines[1]
    assert sender.outcomes == {("z.example.", f"127.0.0.1:{secondary.port}", "no_answer"): 1}


def test_a_slow_but_answering_secondary_under_a_burst_of_changes_is_no_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Changes every 30 ms end rounds while a far secondary's answer (100 ms) is on its way:
    that is no failure, so it is neither logged nor counted (an alert on the count would
    page for a healthy secondary)."""
    caplog.set_level(logging.INFO, logger="dnsd.xfr.notify")
    secondary = Secondary(delay=0.1)
    holder = holder_for(tmp_path, secondary.port)

    async def burst() -> NotifySender:
        sender = NotifySender(holder)
        for serial in range(11, 91):
            holder.swap(with_serials(holder.current, {"z.example.": serial}))
            sender.changed("z.example.", serial)
            await asyncio.sleep(0.03)
        await asyncio.sleep(0.5)  # the last round is answered
        await sender.stop()
        return sender

    try:
        sender = asyncio.run(burst())
    finally:
        secondary.close()
    assert len(secondary.received) >= 3  # a round a second, each cut short
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not warnings
    assert set(sender.outcomes) == {("z.example.", f"127.0.0.1:{secondary.port}", "noerror")}
