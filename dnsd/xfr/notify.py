"""NOTIFY (RFC 1996): tell a zone's `notify:` targets of every new serial.

Each target is sent a NOTIFY over UDP with the zone's SOA in the answer section, signed
with the zone's first `transfer.keys` key when it has keys. A target that does not answer
is asked again after 1, 2, 4, 8 s (5 tries in all). At most one round per zone per second:
serial changes in between are folded into the next round, which always carries the
latest serial (a newer change also ends the retries of an older one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
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

from dnsd.ratelog import RateLimitedLog
from dnsd.rdata import to_text as rdata_text
from dnsd.snapshot import SnapshotHolder

log = logging.getLogger("dnsd.xfr.notify")
FAILURE_LOG = RateLimitedLog(log)
TRIES: Final = 5
FIRST_WAIT_S: Final = 1.0  # per-try answer timeout, doubled each try
MIN_INTERVAL_S: Final = 1.0  # per zone


class NotifySender:
    def __init__(self, holder: SnapshotHolder) -> None:
        self._holder = holder
        self._rounds: dict[str, asyncio.Task[None]] = {}
        self._last_round: dict[str, float] = {}
        self.sent = 0
        self.answered = 0
        self.failed = 0

    def changed(self, zone: str, serial: int) -> None:
        """A zone has a new serial (ZoneVersions listener; runs in the event loop)."""
        compiled = self._holder.current.zones.get(zone)
        if compiled is None or not compiled.config.notify:
            return
        running = self._rounds.get(zone)
        if running is not None and not running.done():
            running.cancel()  # the latest serial wins
        task = asyncio.get_running_loop().create_task(self._round(zone))
        task.add_done_callback(_log_failure)
        self._rounds[zone] = task

    async def stop(self) -> None:
        for task in self._rounds.values():
            task.cancel()
        for task in self._rounds.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _round(self, zone: str) -> None:
        wait = self._last_round.get(zone, 0.0) + MIN_INTERVAL_S - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self._last_round[zone] = time.monotonic()
        compiled = self._holder.current.zones.get(zone)  # read now: the latest serial
        if compiled is None:
            return
        transfer = compiled.config.transfer
        key = transfer.keys[0] if transfer and transfer.keys else None
        soa_text = rdata_text(6, compiled.soa.rdata)  # dnspython's text: names with any bytes
        message = notify_message(zone, compiled.soa.ttl, soa_text)
        if key is not None:
            ring = self._holder.current.tsig_keyring
            message.use_tsig(ring, keyname=dns.name.from_text(key))
        serial = compiled.soa.rdata.times[0]
        await asyncio.gather(
            *(
                self._send(zone, serial, message, host, port)
                for host, port in compiled.config.notify
            )
        )

    async def _send(
        self, zone: str, serial: int, message: dns.message.Message, host: str, port: int
    ) -> None:
        timeout = FIRST_WAIT_S
        for attempt in range(1, TRIES + 1):
            self.sent += 1
            try:
                reply = await dns.asyncquery.udp(message, host, timeout=timeout, port=port)
            except (dns.exception.Timeout, OSError) as exc:
                reason = "no answer" if isinstance(exc, dns.exception.Timeout) else str(exc)
                if attempt == TRIES:
                    self.failed += 1
                    FAILURE_LOG.log(time.time(), logging.WARNING,
                                    "NOTIFY %s serial %d to %s port %d: %s after %d tries",
                                    zone, serial, host, port, reason, TRIES)  # fmt: skip
                    return
                timeout *= 2
                continue
            except dns.exception.DNSException as exc:  # a reply that does not check
                self.failed += 1
                FAILURE_LOG.log(time.time(), logging.WARNING, "NOTIFY %s to %s port %d: %s",
                                zone, host, port, exc)  # fmt: skip
                return
            self.answered += 1
            rcode = dns.rcode.to_text(reply.rcode())
            log.info("NOTIFY %s serial %d to %s port %d: %s", zone, serial, host, port, rcode)
            return


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
