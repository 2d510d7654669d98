"""NOTIFY (RFC 1996): sent to a zone's targets on a serial change, signed with the zone's
key, retried until answered, at most one round per zone per second with the latest
serial. The target is a real UDP socket that answers like a secondary (dnspython); the
sender's timers (rounds, answer timeouts) run on a FakeClock the tests advance, so a 4 s
retry schedule takes no 4 s — the packets are real and are waited for."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dns.message
import dns.opcode
import dns.tsigkeyring
import pytest

from dnsd.loading import load_snapshot
from dnsd.snapshot import SnapshotHolder, with_serials
from dnsd.xfr import notify
from dnsd.xfr.notify import NotifySender
from tests.fake_clock import FakeClock
from tests.waiting import until_async

SECRET = base64.b64encode(bytes(range(32))).decode()
RING = dns.tsigkeyring.from_text({"xfr-key": SECRET})
ZONE = "z.example."


class Secondary:
    """Answers every NOTIFY after ignoring the first `ignore` of them; records what came.
    With `hold`, each answer waits until `hold` is set (an answer on its way)."""

    def __init__(self, ignore: int = 0, hold: threading.Event | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.ignore = ignore
        self.hold = hold
        self.received: list[tuple[int, bool]] = []  # (serial, signed)
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
            self.received.append((message.answer[0][0].serial, message.had_tsig))
            if len(self.received) > self.ignore:
                while self.hold is not None and not self.hold.wait(0.2) and not self.stop:
                    pass
                self.sock.sendto(dns.message.make_response(message).to_wire(), peer)

    @property
    def serials(self) -> list[int]:
        return [serial for serial, _ in self.received]

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


class Stamped(logging.Handler):
    """The NOTIFY log lines about one secondary, each with the fake time it was written."""

    def __init__(self, clock: FakeClock, port: int) -> None:
        super().__init__(logging.INFO)
        self.clock, self.port = clock, port
        self.lines: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if f"port {self.port}" in record.getMessage():
            self.lines.append((self.clock.now, record.getMessage()))


@contextmanager
def stamped(clock: FakeClock, port: int) -> Iterator[Stamped]:
    logger = logging.getLogger("dnsd.xfr.notify")
    handler = Stamped(clock, port)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def change(holder: SnapshotHolder, sender: NotifySender, serial: int) -> None:
    holder.swap(with_serials(holder.current, {ZONE: serial}))
    sender.changed(ZONE, serial)


async def received(secondary: Secondary, count: int) -> None:
    """The real socket has had `count` NOTIFYs (they travel in real time)."""
    await until_async(lambda: len(secondary.received) >= count, 5.0, f"{count} NOTIFYs")


def holder_for(tmp_path: Path, port: int) -> SnapshotHolder:
    (tmp_path / "xfr.b64").write_text(SECRET)
    (tmp_path / "z.yaml").write_text(
        "tsig_keys:\n  xfr-key: {secret_file: xfr.b64}\n"
        "zone: z.example\nsoa: {mname: ns.z.example., rname: h.z.example., serial: 10}\n"
        'records:\n  "@": {NS: ns.z.example.}\n  ns: {A: 192.0.2.1}\n'
        f'transfer: {{allow: [127.0.0.1/32], keys: [xfr-key]}}\nnotify: ["127.0.0.1:{port}"]\n'
    )
    return SnapshotHolder(load_snapshot(tmp_path, 1))


Steps = Callable[[NotifySender, FakeClock, SnapshotHolder], Awaitable[None]]


def run_sender(
    tmp_path: Path, secondary: Secondary, steps: Steps
) -> tuple[NotifySender, list[tuple[float, str]]]:
    """`steps` against a NotifySender on a FakeClock that tells the real `secondary`: the
    sender, stopped, and its log lines stamped with the fake time since the start. The
    secondary is closed afterwards, passed or not."""
    holder = holder_for(tmp_path, secondary.port)
    clock = FakeClock()

    async def run() -> tuple[NotifySender, list[tuple[float, str]]]:
        sender = NotifySender(holder, clock)
        start = clock.now
        with stamped(clock, secondary.port) as log:
            await steps(sender, clock, holder)
            await sender.stop()
        return sender, [(at - start, line) for at, line in log.lines]

    try:
        return asyncio.run(run())
    finally:
        secondary.close()


def test_changes_in_a_burst_give_one_round_per_second_with_the_latest_serial(
    tmp_path: Path,
) -> None:
    secondary = Secondary()

    async def burst(sender: NotifySender, clock: FakeClock, holder: SnapshotHolder) -> None:
        for serial in range(11, 21):  # ten changes within a few milliseconds
            change(holder, sender, serial)
            await clock.advance(0.005)
        await received(secondary, 1)
        await until_async(lambda: sender.answered == 1)
        await clock.advance(0.99 - 0.05)  # a second after the first round: not yet
        assert sender.sent == 1
        await clock.advance(0.01)
        await received(secondary, 2)
        await until_async(lambda: sender.answered == 2)
        await clock.advance(5.0)  # no change since: no more rounds

    sender, _ = run_sender(tmp_path, secondary, burst)
    assert secondary.serials == [11, 20]  # one round at once, the next with the latest serial
    assert sender.sent == 2
    assert all(signed for _, signed in secondary.received)  # signed with transfer.keys[0]


def test_an_unanswered_notify_is_sent_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dnsd.xfr.notify")
    secondary = Secondary(ignore=2)  # the first two tries get no answer

    async def once(sender: NotifySender, clock: FakeClock, holder: SnapshotHolder) -> None:
        change(holder, sender, 11)
        await received(secondary, 1)
        await clock.advance(0.99)
        assert sender.sent == 1  # no answer yet, but its second has not passed
        await clock.advance(0.01)  # tries after 0, 1 and 3 s
        await received(secondary, 2)
        await clock.advance(1.99)
        assert sender.sent == 2
        await clock.advance(0.01)
        await received(secondary, 3)
        await until_async(lambda: sender.answered == 1)
        await clock.advance(20.0)  # answered: no more tries

    sender, lines = run_sender(tmp_path, secondary, once)
    assert secondary.serials == [11, 11, 11]
    assert sender.answered == 1 and sender.sent == 3
    assert len(lines) == 2, lines  # silent after the first try; answering again
    assert lines[0][0] == pytest.approx(1.0) and "no answer within 1 s; trying again" in lines[0][1]
    assert "NOERROR, answered again after 2 unanswered tries over 3 s" in lines[1][1]
    assert sender.outcomes == {("z.example.", f"127.0.0.1:{secondary.port}", "noerror"): 1}


def test_a_dead_secondary_is_logged_within_seconds_and_once_per_episode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dnsd.xfr.notify")
    secondary = Secondary(ignore=10**9)  # a real socket that takes NOTIFY and never answers

    async def changes(sender: NotifySender, clock: FakeClock, holder: SnapshotHolder) -> None:
        change(holder, sender, 11)
        await received(secondary, 1)
        await clock.advance(2.5)  # the first try timed out at 1 s; the second is waiting
        await received(secondary, 2)
        for serial in range(12, 20):  # newer serials supersede round after round
            change(holder, sender, serial)
            await clock.advance(0.4)
        await received(secondary, 4)

    sender, lines = run_sender(tmp_path, secondary, changes)
    assert lines, "a NOTIFY to a dead secondary logged nothing"
    first_at, first = lines[0]
    assert first_at < 2.0 and "serial 11" in first and "no answer within 1 s" in first
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

    async def changes(sender: NotifySender, clock: FakeClock, holder: SnapshotHolder) -> None:
        for serial in range(11, 25):
            change(holder, sender, serial)
            await clock.advance(0.3)
        await received(secondary, 3)

    sender, lines = run_sender(tmp_path, secondary, changes)
    assert len(lines) == 2, lines
    assert lines[0][0] < 2.0 and "serial 11" in lines[0][1]
    assert "no answer within 1 s" in lines[0][1] and "superseded by serial" in lines[1][1]
    superseded = sender.outcomes[("z.example.", f"127.0.0.1:{secondary.port}", "superseded")]
    assert superseded >= 2 and len(secondary.received) >= 3


def test_a_round_given_up_is_logged_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="dnsd.xfr.notify")
    monkeypatch.setattr(notify, "TRIES", 2)  # tries at 0 and 1 s, given up at 3 s
    secondary = Secondary(ignore=10**9)

    async def once(sender: NotifySender, clock: FakeClock, holder: SnapshotHolder) -> None:
        change(holder, sender, 11)
        await received(secondary, 1)
        await clock.advance(1.0)
        await received(secondary, 2)
        await clock.advance(2.0)
        await clock.advance(20.0)  # given up: no more tries

    sender, lines = run_sender(tmp_path, secondary, once)
    assert len(lines) == 2, lines
    assert lines[1][0] == pytest.approx(3.0)
    assert "no answer after 2 tries: given up" in lines[1][1]
    assert sender.sent == 2 and len(secondary.received) == 2
    assert sender.outcomes == {("z.example.", f"127.0.0.1:{secondary.port}", "no_answer"): 1}


def test_a_slow_but_answering_secondary_under_a_burst_of_changes_is_no_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Changes every 30 ms come while a far secondary's answer is on its way (held back
    until the changes are done, within the try's second): that is no failure, so it is
    neither logged nor counted (an alert on the count would page for a healthy
    secondary), and the next round carries the latest serial."""
    caplog.set_level(logging.INFO, logger="dnsd.xfr.notify")
    hold = threading.Event()
    secondary = Secondary(hold=hold)

    async def burst(sender: NotifySender, clock: FakeClock, holder: SnapshotHolder) -> None:
        try:
            change(holder, sender, 11)
            await received(secondary, 1)
            for serial in range(12, 42):  # 30 changes over 0.9 s, the answer on its way
                await clock.advance(0.03)
                change(holder, sender, serial)
            hold.set()  # the answer arrives
            await until_async(lambda: sender.answered == 1, 5.0, "the held answer taken")
            await clock.advance(0.1)  # a second after the first round: the next one
            await received(secondary, 2)
            await until_async(lambda: sender.answered == 2)
        finally:
            hold.set()  # the secondary's thread is never left waiting (it closes next)

    sender, _ = run_sender(tmp_path, secondary, burst)
    assert secondary.serials == [11, 41]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not warnings
    assert sender.outcomes == {("z.example.", f"127.0.0.1:{secondary.port}", "noerror"): 2}
