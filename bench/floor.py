"""The Python floor for bench/peers.py: a UDP loop that answers every query with
precomputed bytes (A 127.0.0.80), through the same batched I/O dnsd uses. It does nothing
a DNS server must do; it shows what the interpreter and the system calls cost alone.

    python bench/floor.py PORT
"""

from __future__ import annotations

import socket
import struct
import sys

from dnsd.net.mmsg import DatagramBatch

ANSWER = struct.pack("!HHHIH", 0xC00C, 1, 1, 30, 4) + socket.inet_aton("127.0.0.80")


def reply_tail(query: bytes) -> bytes:
    """The reply after its ID: flags (QR AA, RD copied), one question, one A record."""
    end = 12
    while query[end]:
        end += query[end] + 1
    question = query[12 : end + 5]
    flags = 0x8400 | (query[2] & 0x01) << 8
    return struct.pack("!HHHHH", flags, 1, 1, 0, 0) + question + ANSWER


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("127.0.0.1", int(sys.argv[1])))
    batch = DatagramBatch(sock)
    memo: dict[bytes, bytes] = {}
    while True:
        count = batch.receive()
        for i, data in enumerate(batch.datagrams(count)):
            if data is None or len(data) < 17:
                continue
            tail = memo.get(data[2:])
            if tail is None:
                tail = memo[data[2:]] = reply_tail(data)
            batch.queue(i, data[:2] + tail)
        batch.flush()


if __name__ == "__main__":
    main()
