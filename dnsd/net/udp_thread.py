"""UDP served by a blocking socket loop in its own thread: a batch of datagrams in
(recvmmsg, dnsd.net.mmsg), the batch answered, the replies out (sendmmsg); recvfrom and
sendto one at a time where the batched calls are missing.

Measured faster than the asyncio and uvloop datagram protocols for this workload (README,
"Performance"): no event-loop bookkeeping, no transport objects, one thread that only
does this. The asyncio loop keeps TCP, the admin API and the probes. Answering is
synchronous and never awaits, so the thread needs no locks beyond the GIL; it has its
own answer cache.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable

from dnsd.net import mmsg
from dnsd.net.counters import NetCounters
from dnsd.net.rrl import ResponseRateLimiter, truncated
from dnsd.net.udp import CLIENTS_CACHED, client_address
from dnsd.resolve import Client

log = logging.getLogger("dnsd.net.udp")
BatchAnswerer = Callable[[list[bytes], list[Client]], list[bytes | None]]


class UdpThread:
    def __init__(
        self,
        sock: socket.socket,
        answer: BatchAnswerer,
        counters: NetCounters,
        rrl: ResponseRateLimiter | None,
    ) -> None:
        self.sock = sock
        self._answer = answer
        self._counters = counters
        self._rrl = rrl if rrl is not None and rrl.enabled else None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="dnsd udp", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        if mmsg.available():
            self._run_batched(mmsg.DatagramBatch(self.sock))
        else:
            self._run_plain()

    def _run_batched(self, batch: mmsg.DatagramBatch) -> None:
        """recvmmsg → answer the batch → sendmmsg: two system calls for up to 64 queries."""
        answer, counters, rrl = self._answer, self._counters, self._rrl
        clients: dict[int | bytes, Client] = {}
        while True:
            try:
                count = batch.receive()
            except OSError:
                if self._stopping:
                    return
                continue
            if self._stopping:
                return
            counters.udp_queries += count
            keys = batch.source_keys(count)
            wires, whos, slots = [], [], []
            for i, data in enumerate(batch.datagrams(count)):
                if data is None:  # longer than any query dnsd answers: cut by the kernel
                    counters.dropped += 1
                    continue
                client = clients.get(keys[i])
                if client is None:
                    if len(clients) >= CLIENTS_CACHED:
                        clients.clear()
                    client = clients[keys[i]] = Client(client_address(batch.source(i)[0]), "udp")
                wires.append(data)
                whos.append(client)
                slots.append(i)
            for i, reply, client in zip(slots, answer(wires, whos), whos, strict=True):
                if reply is None:
                    counters.dropped += 1
                    continue
                if rrl is not None:
                    reply = self._limit(rrl, reply, client)
                    if reply is None:
                        continue
                batch.queue(i, reply)
            if batch.queued and batch.flush():
                log.debug("udp: some replies of a batch could not be sent")

    def _run_plain(self) -> None:
        recvfrom, sendto = self.sock.recvfrom, self.sock.sendto
        answer, counters, rrl = self._answer, self._counters, self._rrl
        clients: dict[str, Client] = {}
        while True:
            try:
                data, addr = recvfrom(4096)
            except OSError:
                if self._stopping:
                    return
                continue
            if self._stopping:
                return
            counters.udp_queries += 1
            client = clients.get(addr[0])
            if client is None:
                if len(clients) >= CLIENTS_CACHED:
                    clients.clear()
                client = clients[addr[0]] = Client(client_address(addr[0]), "udp")
            reply = answer([data], [client])[0]
            if reply is None:
                counters.dropped += 1
                continue
            if rrl is not None:
                reply = self._limit(rrl, reply, client)
                if reply is None:
                    continue
            try:
                sendto(reply, addr)
            except OSError as exc:
                log.debug("udp send to %s failed: %s", addr[0], exc)

    @staticmethod
    def _limit(rrl: ResponseRateLimiter, reply: bytes, client: Client) -> bytes | None:
        verdict = rrl.check(client.address, reply, time.monotonic())
        if verdict == "drop":
            return None
        return truncated(reply) if verdict == "slip" else reply

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked recvfrom
        self.sock.close()
        self._thread.join(timeout=5)
