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
from collections.abc import Callable

from dnsd.net import mmsg
from dnsd.net.rrl import ResponseRateLimiter, limited
from dnsd.net.udp import new_client
from dnsd.reply import Client

log = logging.getLogger("dnsd.net.udp")
BatchAnswerer = Callable[[list[bytes], list[Client]], list[bytes | None]]


class UdpThread:
    def __init__(
        self,
        sock: socket.socket,
        answer: BatchAnswerer,
        rrl: ResponseRateLimiter | None,
    ) -> None:
        self.sock = sock
        self._answer = answer
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
        answer, rrl = self._answer, self._rrl
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
            # A datagram cut by the kernel (None) goes in empty: dropped and counted.
            wires = [data or b"" for data in batch.datagrams(count)]
            whos = [
                clients.get(key) or new_client(clients, key, batch.source(i)[0])
                for i, key in enumerate(batch.source_keys(count))
            ]
            for i, (reply, client) in enumerate(zip(answer(wires, whos), whos, strict=True)):
                if reply is None:  # the answerer counted it
                    continue
                if rrl is not None:
                    reply = limited(rrl, client.address, reply, wires[i])
                    if reply is None:
                        continue
                batch.queue(i, reply)
            if batch.queued and batch.flush():
                log.debug("udp: some replies of a batch could not be sent")

    def _run_plain(self) -> None:
        recvfrom, sendto = self.sock.recvfrom, self.sock.sendto
        answer, rrl = self._answer, self._rrl
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
            client = clients.get(addr[0]) or new_client(clients, addr[0], addr[0])
            reply = answer([data], [client])[0]
            if reply is None:  # the answerer counted it
                continue
            if rrl is not None:
                reply = limited(rrl, client.address, reply, data)
                if reply is None:
                    continue
            try:
                sendto(reply, addr)
            except OSError as exc:
                log.debug("udp send to %s failed: %s", addr[0], exc)

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked recvfrom
        self.sock.close()
        self._thread.join(timeout=5)
