"""Zone transfers over TCP (the I/O around dnsd.xfr.outgoing): check the TSIG and the ACL,
take the zone's current version (and the client's, for IXFR) from the journal, build and
sign the messages in a worker thread (a large zone must not stall the event loop), and log
one line per transfer. Refusals are logged at a bounded rate: strangers choose them. Every
transfer and refusal is counted (`count`: dnsd_transfers_total{zone,type,result} and
dnsd_transfer_bytes_total{zone,type}); `zone` is empty unless it names a zone served here,
so a stranger cannot add series."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Callable

import dns.message
import dns.rcode
import dns.rdatatype

from dnsd.dnssec.zone_signing import signed_zone
from dnsd.health.view import HealthView
from dnsd.ratelog import RateLimitedLog
from dnsd.reply import Client, header_only
from dnsd.snapshot import Snapshot, SnapshotHolder
from dnsd.xfr import outgoing, tsig
from dnsd.xfr.content import ZoneContent, zone_content
from dnsd.xfr.serials import serial_gt
from dnsd.xfr.versions import ZoneVersions
from dnsd.zone_keys import ZoneKeys

log = logging.getLogger("dnsd.xfr")
REFUSAL_LOG = RateLimitedLog(log)
MAX_CONCURRENT = 4  # transfers being built at once; more wait their turn
# (zone, type, result, bytes sent) of one transfer or refusal: Metrics.observe_transfer
TransferCount = Callable[[str, str, str, int], None]


class TransferService:
    def __init__(
        self,
        holder: SnapshotHolder,
        versions: ZoneVersions | None,
        view: Callable[[], HealthView],
        count: TransferCount | None = None,
    ) -> None:
        self._holder = holder
        self._count = count
        self._versions = versions  # None in a worker: versions are built from its snapshot
        self._view = view
        self._building = asyncio.Semaphore(MAX_CONCURRENT)
        self.transfers = 0
        self.refused = 0

    async def answer(self, wire: bytes, client: Client) -> list[bytes]:
        """The reply messages for an AXFR/IXFR query arriving over TCP."""
        snap, now = self._holder.current, time.time()
        try:
            query = tsig.check(wire, snap.tsig_keyring, now)
        except tsig.TsigFailure as failure:
            self._refused(now, client, f"{failure.describe()}: NOTAUTH", wire, "", "notauth")
            return [failure.reply]
        except Exception:
            ident, flags = int.from_bytes(wire[:2]), int.from_bytes(wire[2:4])
            self._counted(wire, "", "formerr", 0)
            return [header_only(ident, flags, dns.rcode.FORMERR)]
        name = query.question[0].name.to_text().lower() if query.question else ""
        qtype = query.question[0].rdtype if query.question else 0
        compiled = snap.zones.get(name)
        if compiled is None or len(query.question) != 1:
            what = f"transfer of {name or '?'}: not a zone here: NOTAUTH"
            self._refused(now, client, what, wire, "", "notauth")
            return outgoing.render([outgoing.refuse(query, dns.rcode.NOTAUTH)])
        address = ipaddress.ip_address(client.address)
        refusal = outgoing.allowed(compiled.config.transfer, address, query)
        if refusal is not None:
            result = dns.rcode.to_text(dns.rcode.Rcode(refusal.rcode)).lower()
            self._refused(now, client, f"transfer of {name}: {refusal.reason}", wire, name, result)
            return outgoing.render([outgoing.refuse(query, refusal.rcode)])
        asked = outgoing.requested_serial(query) if qtype == dns.rdatatype.IXFR else None
        old = self._versions.version(name, asked) if self._versions and asked is not None else None
        kept = self._versions.current(name) if self._versions is not None else None
        view = self._view()
        signing = snap.signing.get(name)
        async with self._building:  # content (a worker makes its own) and messages: a thread
            current, replies, form = await asyncio.to_thread(
                _build,
                query,
                qtype,
                kept or (snap, view, name, now),
                old,
                asked,
                (signing, compiled.config.ttl, now) if signing is not None else None,
            )
        self.transfers += 1
        self._counted(wire, name, form, sum(len(reply) for reply in replies))
        kind = dns.rdatatype.to_text(dns.rdatatype.RdataType.make(qtype))
        key = tsig.key_name(query.keyring) if query.had_tsig else None
        log.info(
            "%s %s to %s%s: serial %d%s, %d message(s)",
            kind,
            name,
            client.address,
            f" (key {key})" if key else "",
            current.serial,
            f" from {asked}" if asked is not None else "",
            len(replies),
        )
        return replies

    def _refused(
        self, now: float, client: Client, what: str, wire: bytes, zone: str, result: str
    ) -> None:
        self.refused += 1
        self._counted(wire, zone, result, 0)
        REFUSAL_LOG.log(now, logging.WARNING, "%s (from %s)", what, client.address)

    def _counted(self, wire: bytes, zone: str, result: str, size: int) -> None:
        if self._count is not None:
            kind = "IXFR" if outgoing.transfer_type(wire) == outgoing.IXFR else "AXFR"
            self._count(zone, kind, result, size)


def _build(
    query: dns.message.Message,
    qtype: int,
    current: ZoneContent | tuple[Snapshot, HealthView, str, float],
    old: ZoneContent | None,
    asked: int | None,
    signing: tuple[ZoneKeys, int, float] | None,
) -> tuple[ZoneContent, list[bytes], str]:
    """The content, the wire messages and how it was sent (`full`, `incremental` or
    `current`: an IXFR client already up to date)."""
    if not isinstance(current, ZoneContent):  # no kept version (a worker): make it here
        current = zone_content(*current)
    if signing is not None:  # a signed zone goes whole, signed (IXFR too: RFC 1995 §4)
        if (
            qtype == dns.rdatatype.IXFR
            and asked is not None
            and not serial_gt(current.serial, asked)
        ):
            return current, outgoing.render(outgoing.ixfr(query, current, None, asked)), "current"
        keys, dnskey_ttl, now = signing
        soa, rrsets = signed_zone(
            current.name, current.soa, current.rrsets(), current.digest, keys, dnskey_ttl, now
        )
        return current, outgoing.render(outgoing.whole_zone(query, soa, rrsets)), "full"
    if qtype == dns.rdatatype.IXFR:
        replies = outgoing.render(outgoing.ixfr(query, current, old, asked))
        return current, replies, outgoing.ixfr_form(current, old, asked)
    return current, outgoing.render(outgoing.axfr(query, current)), "full"
