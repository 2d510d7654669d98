"""NOTIFY (RFC 1996): tell a zone's `notify:` targets of every new serial.

Each target is sent a NOTIFY over UDP with the zone's SOA in the answer section, signed
with the zone's first `transfer.keys` key when it has keys. A target that does not answer
is asked again after 1, 2, 4, 8 s (5 tries in all). At most one round per zone per second:
serial changes in between are folded into the next round, which always carries the
latest serial (a newer change also ends the retries of an older one, but only once each
of its first tries has had its answer or its timeout: under changes faster than a
secondary's round trip it still answers, and a dead one is still found silent).

A secondary that stops answering is never silent, and never loud: per secondary and per
failure episode (from its first unanswered try until it answers again) one line when it
has not answered its first try in FIRST_WAIT_S, one when a round ends without its answer
(given up after the last try, or superseded by a newer serial — with changes every second
a round may never reach its third try), and one when it answers again. Each round's
outcome per secondary is counted in `dnsd_notify_total{zone,secondary,result}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import dns.asyncquery
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from prometheus_client.core import CounterMetricFamily

from dnsd.clock import SYSTEM, Clock, within
from dnsd.ratelog import RateLimitedLog
from dnsd.rdata import to_text as rdata_text
from dnsd.snapshot import SnapshotHolder

log = logging.getLogger("dnsd.xfr.notify")
FAILURE_LOG = RateLimitedLog(log)  # replies that refuse or do not check: the peer chooses
TRIES: Final = 5
FIRST_WAIT_S: Final = 1.0  # per-try answer timeout, doubled each try
MIN_INTERVAL_S: Final = 1.0  # per zone


@dataclass
class _Silence:
    """A secondary's failure episode: since its oldest try not answered since."""

    since: float  # monotonic
    tries: int = 0  # tries that ended without an answer (timed out or superseded)
    reported: bool = False  # the "not answering" line is out
    round_reported: bool = False  # the "round ended without an answer" line is out


@dataclass
class _Sending:
    """The round of a zone that is sending: its task, and an event set once every
    target's first try has ended (answered, or timed out within FIRST_WAIT_S)."""

    task: asyncio.Task[None]
    first_tries_done: asyncio.Event


class NotifySender:
    def __init__(self, holder: SnapshotHolder, clock: Clock = SYSTEM) -> None:
        self._holder = holder
        self._clock = clock  # rounds, answer timeouts and silences are timed on it
        self._waiting: dict[str, asyncio.Task[None]] = {}  # a round not sending yet
        self._sending: dict[str, _Sending] = {}
        self._last_round: dict[str, float] = {}
        self._newer: dict[str, int] = {}  # zone: the serial that superseded its round
        self._silent: dict[tuple[str, int], _Silence] = {}  # per secondary, while unanswered
        self._stopping = False
        self.outcomes: dict[tuple[str, str, str], int] = {}  # (zone, secondary, result)
        self.sent = 0
        self.answered = 0
        self.failed = 0

    def changed(self, zone: str, serial: int) -> None:
        """A zone has a new serial (ZoneVersions listener; runs in the event loop)."""
        compiled = self._holder.current.zones.get(zone)
        if compiled is None or not compiled.config.notify:
            return
        waiting = self._waiting.get(zone)
        if waiting is not None and not waiting.done():
            waiting.cancel()  # folded into the new round, which reads the latest serial
        task = asyncio.get_running_loop().create_task(self._round(zone))
        task.add_done_callback(_log_failure)
        self._waiting[zone] = task

    async def stop(self) -> None:
        self._stopping = True
        tasks = [*self._waiting.values(), *(s.task for s in self._sending.values())]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _round(self, zone: str) -> None:
        wait = self._last_round.get(zone, 0.0) + MIN_INTERVAL_S - self._clock.monotonic()
        if wait > 0:
            await self._clock.sleep(wait)
        previous = self._sending.get(zone)
        if previous is not None and not previous.task.done():
            # The latest serial wins, but not before every first try of the older round
            # has had its answer or its timeout: a secondary whose answer is on its way is
            # not a failure, and one that gave none in FIRST_WAIT_S is said to be silent.
            await previous.first_tries_done.wait()
        compiled = self._holder.current.zones.get(zone)  # read now: the latest serial
        if compiled is None:
            return
        serial = compiled.soa.rdata.times[0]
        if previous is not None and not previous.task.done():
            self._newer[zone] = serial
            previous.task.cancel()
        task = asyncio.current_task()
        assert task is not None
        if self._waiting.get(zone) is task:
            del self._waiting[zone]  # from here on a change no longer folds into this round
        first_tries_done = asyncio.Event()
        self._sending[zone] = _Sending(task, first_tries_done)
        self._last_round[zone] = self._clock.monotonic()
        transfer = compiled.config.transfer
        key = transfer.keys[0] if transfer and transfer.keys else None
        soa_text = rdata_text(6, compiled.soa.rdata)  # dnspython's text: names with any bytes
        message = notify_message(zone, compiled.soa.ttl, soa_text)
        if key is not None:
            ring = self._holder.current.tsig_keyring
            message.use_tsig(ring, keyname=dns.name.from_text(key))
        targets = compiled.config.notify
        left = [len(targets)]

        def first_try_ended() -> None:
            left[0] -= 1
            if left[0] == 0:
                first_tries_done.set()

        await asyncio.gather(
            *(
                self._send(zone, serial, message, host, port, first_try_ended)
                for host, port in targets
            )
        )

    async def _send(
        self,
        zone: str,
        serial: int,
        message: dns.message.Message,
        host: str,
        port: int,
        first_try_ended: Callable[[], None],
    ) -> None:
        timeout = FIRST_WAIT_S
        what = f"NOTIFY {zone} serial {serial} to {host} port {port}"
        for attempt in range(1, TRIES + 1):
            self.sent += 1
            silence = self._silent.setdefault((host, port), _Silence(self._clock.monotonic()))
            try:
                reply = await within(
                    self._clock, dns.asyncquery.udp(message, host, port=port), timeout
                )
            except asyncio.CancelledError:
                if not self._stopping:  # a newer serial took over this round
                    self._superseded(zone, what, host, port, silence)
                raise
            except (TimeoutError, OSError) as exc:
                reason = "no answer" if isinstance(exc, TimeoutError) else str(exc)
                silence.tries += 1
                if attempt == TRIES:
                    self.failed += 1
                    self._round_lost(
                        zone,
                        host,
                        port,
                        "no_answer",
                        silence,
                        f"{what}: {reason} after {TRIES} tries: given up",
                    )
                    return
                if not silence.reported:
                    silence.reported = True
                    log.warning(
                        "%s: %s within %.0f s; trying again (%d tries in all)",
                        what,
                        reason,
                        timeout,
                        TRIES,
                    )
                timeout *= 2
                continue
            except dns.exception.DNSException as exc:  # a reply that does not check
                self.failed += 1
                self._silent.pop((host, port), None)  # it answers: not silent
                self._count(zone, host, port, "bad_reply")
                FAILURE_LOG.log(self._clock.time(), logging.WARNING, "%s: %s", what, exc)
                return
            finally:
                if attempt == 1:  # answered, refused or timed out: a newer round may go
                    first_try_ended()
            self.answered += 1
            rcode = dns.rcode.to_text(reply.rcode())
            self._count(zone, host, port, rcode.lower())
            ended = self._silent.pop((host, port), None)
            if ended is not None and ended.reported:
                log.warning(
                    "%s: %s, answered again after %d unanswered tries over %.0f s",
                    what,
                    rcode,
                    ended.tries,
                    self._clock.monotonic() - ended.since,
                )
            elif reply.rcode() != dns.rcode.NOERROR:
                FAILURE_LOG.log(self._clock.time(), logging.WARNING, "%s: %s", what, rcode)
            else:
                log.info("%s: %s", what, rcode)
            return

    def _superseded(self, zone: str, what: str, host: str, port: int, silence: _Silence) -> None:
        silence.tries += 1
        silent_s = self._clock.monotonic() - silence.since
        self._round_lost(
            zone,
            host,
            port,
            "superseded",
            silence,
            f"{what}: no answer for {silent_s:.1f} s, superseded by serial {self._newer.get(zone)}",
        )

    def _round_lost(
        self, zone: str, host: str, port: int, result: str, silence: _Silence, line: str
    ) -> None:
        """A round ended without this secondary's answer (after at least its first try
        went unanswered): counted, and logged once an episode."""
        self._count(zone, host, port, result)
        if silence.round_reported:
            return
        silence.reported = silence.round_reported = True
        log.warning("%s; not logged again until it answers", line)

    def _count(self, zone: str, host: str, port: int, result: str) -> None:
        key = (zone, _secondary(host, port), result)
        self.outcomes[key] = self.outcomes.get(key, 0) + 1

    def collect(self) -> Iterator[CounterMetricFamily]:
        """Its Prometheus collector (Metrics.register)."""
        family = CounterMetricFamily(
            "dnsd_notify",
            "NOTIFY rounds per secondary by outcome: the reply's rcode "
            "(noerror, refused, ...), no_answer, superseded or bad_reply",
            labels=["zone", "secondary", "result"],
        )
        for labels, count in sorted(self.outcomes.items()):
            family.add_metric(list(labels), count)
        yield family


def _secondary(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("NOTIFY round failed", exc_info=task.exception())


def notify_message(zone: str, ttl: int, soa_rdata: str) -> dns.message.Message:
    """A NOTIFY for `zone` carrying its SOA (RFC 1996 §3.7)."""
    message = dns.message.make_query(zone, dns.rdatatype.SOA)
    message.flags = dns.flags.AA  # flags first: the opcode lives in the same field
    message.set_opcode(dns.opcode.NOTIFY)
    message.answer.append(dns.rrset.from_text(zone, ttl, "IN", "SOA", soa_rdata))
    return message
